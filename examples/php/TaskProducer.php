<?php
// The producer of the seed design, unchanged in what it writes: one INSERT
// into task_center through PDO. taskd's own columns all have defaults, so
// this keeps working against a task center that taskd runs.
declare(strict_types=1);

namespace App\Task;

use PDO;

final class TaskProducer
{
    public function __construct(private PDO $pdo)
    {
    }

    /**
     * A one-off task, run after $delaySeconds (0: now).
     *
     * plan_next_run_at is written in PHP's time zone and compared with the
     * database's NOW(): keep PHP's date.timezone equal to MySQL's time_zone.
     */
    public function delay(string $taskCode, int $delaySeconds, array $payload, int $priority = 5, int $timeout = 300, int $maxRetry = 3): int
    {
        $nextRunAt = date('Y-m-d H:i:s', time() + $delaySeconds);

        return $this->insertTask([
            'task_code'        => $taskCode,
            'task_type'        => 0,
            'payload'          => json_encode($payload, JSON_UNESCAPED_UNICODE),
            'delay'            => $delaySeconds,
            'priority'         => $priority,
            'timeout'          => $timeout,
            'max_retry'        => $maxRetry,
            'plan_next_run_at' => $nextRunAt,
            'status'           => 0,
        ]);
    }

    private function insertTask(array $data): int
    {
        $columns      = implode(',', array_keys($data));
        $placeholders = implode(',', array_fill(0, count($data), '?'));
        $stmt = $this->pdo->prepare("INSERT INTO task_center ($columns) VALUES ($placeholders)");
        $stmt->execute(array_values($data));

        return (int) $this->pdo->lastInsertId();
    }
}
