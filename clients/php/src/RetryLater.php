<?php
declare(strict_types=1);

namespace Taskd;

/**
 * Thrown by a pool handler whose failure says when to try again (an API
 * answered "rate limited, come back in 60 s"): the retry waits at least
 * $seconds, or its backoff if that is longer, at most a day. It counts as
 * a retry like any other failure.
 */
class RetryLater extends \RuntimeException
{
    public function __construct(string $message, public readonly int $seconds, ?\Throwable $previous = null)
    {
        parent::__construct($message, 0, $previous);
    }
}
