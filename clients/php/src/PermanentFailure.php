<?php
declare(strict_types=1);

namespace Taskd;

/**
 * Thrown by a pool handler for a failure no retry can mend (a record that
 * no longer exists, a payload the handler refuses): the task is dead at
 * once, whatever retries it has left. Any other exception fails the
 * attempt, and the task is retried as it allows.
 */
class PermanentFailure extends \RuntimeException
{
}
