<?php
declare(strict_types=1);

namespace Taskd\Tests;

use PDO;

/**
 * What the tests reach, from Laravel's variable names: DB_HOST, DB_PORT,
 * DB_DATABASE, DB_USERNAME, DB_PASSWORD (a migrated task center);
 * REDIS_HOST, REDIS_PORT, TASKD_REDIS_PREFIX; TASKD_E2E_CODE, the task code
 * a running daemon serves with examples/worker.php as a pool handler.
 */
final class Env
{
    public static function pdo(string $charset = 'utf8mb4'): ?PDO
    {
        $db = getenv('DB_DATABASE');
        if ($db === false || $db === '') {
            return null;
        }
        $dsn = sprintf('mysql:host=%s;port=%s;dbname=%s;charset=%s',
            getenv('DB_HOST') ?: '127.0.0.1', getenv('DB_PORT') ?: '3306', $db, $charset);

        return new PDO($dsn, getenv('DB_USERNAME') ?: 'root', getenv('DB_PASSWORD') ?: '',
            [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
    }

    public static function redis(): ?object
    {
        if (!extension_loaded('redis') || !getenv('REDIS_PORT')) {
            return null;
        }
        $r = new \Redis();
        $r->connect(getenv('REDIS_HOST') ?: '127.0.0.1', (int) getenv('REDIS_PORT'), 2.0);

        return $r;
    }

    public static function prefix(): string
    {
        return getenv('TASKD_REDIS_PREFIX') ?: 'task:';
    }

    /** @return array<string, mixed>|false the task's row */
    public static function task(PDO $pdo, int $id): array|false
    {
        $stmt = $pdo->prepare('SELECT * FROM task_center WHERE id = ?');
        $stmt->execute([$id]);

        return $stmt->fetch(PDO::FETCH_ASSOC);
    }

    /** Waits up to $seconds for the task to reach one of $statuses. */
    public static function waitStatus(PDO $pdo, int $id, array $statuses, float $seconds): array
    {
        $until = microtime(true) + $seconds;
        do {
            $row = self::task($pdo, $id);
            if ($row !== false && in_array((int) $row['status'], $statuses, true)) {
                return $row;
            }
            usleep(50_000);
        } while (microtime(true) < $until);
        throw new \RuntimeException(sprintf('task %d did not reach status %s within %.0fs: %s',
            $id, implode('/', $statuses), $seconds, json_encode($row)));
    }
}
