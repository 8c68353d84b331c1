<?php
declare(strict_types=1);

namespace Taskd;

use DateTimeImmutable;

/**
 * One attempt of a task, as a pool handler receives it. id and attempt
 * identify the run (a task can run more than once: make handlers
 * idempotent with them or with uniqueKey). scheduledAt is the time the
 * run's occurrence was planned for: a periodic task's cron time, a one-off
 * task's due time, kept by its retries and by a run recovered from a dead
 * worker or late after an outage; id and scheduledAt name an occurrence.
 */
final class Task
{
    /**
     * @param mixed $payload the task's payload, decoded (arrays are associative)
     */
    public function __construct(
        public readonly int $id,
        public readonly string $code,
        public readonly int $attempt,
        public readonly string $uniqueKey,
        public readonly string $queue,
        public readonly mixed $payload,
        public readonly ?DateTimeImmutable $deadline,
        public readonly ?DateTimeImmutable $scheduledAt = null,
        public readonly int $retry = 0,
        public readonly int $maxRetry = 0,
        public readonly string $group = '',
    ) {
    }

    /** Whether this is the last try of the task's retry budget: its failure is final. */
    public function isLastTry(): bool
    {
        return $this->retry >= $this->maxRetry;
    }

    /** @param array<string, mixed> $request a decoded request line */
    public static function fromRequest(array $request): self
    {
        $deadline = null;
        if (!empty($request['deadline'])) {
            $deadline = new DateTimeImmutable((string) $request['deadline']);
        }
        $scheduledAt = null;
        if (!empty($request['scheduled_at'])) {
            $scheduledAt = new DateTimeImmutable((string) $request['scheduled_at']);
        }

        return new self(
            (int) ($request['id'] ?? 0),
            (string) ($request['code'] ?? ''),
            (int) ($request['attempt'] ?? 0),
            (string) ($request['unique_key'] ?? ''),
            (string) ($request['queue'] ?? ''),
            $request['payload'] ?? null,
            $deadline,
            $scheduledAt,
            (int) ($request['retry'] ?? 0),
            (int) ($request['max_retry'] ?? 0),
            (string) ($request['group'] ?? ''),
        );
    }

    /** Seconds left before the attempt times out (null: no deadline). */
    public function secondsLeft(): ?float
    {
        if ($this->deadline === null) {
            return null;
        }

        return (float) $this->deadline->format('U.u') - microtime(true);
    }
}
