<?php
declare(strict_types=1);

namespace Taskd\Tests;

use PHPUnit\Framework\TestCase;
use Taskd\TaskProducer;

/**
 * Against a running daemon that serves TASKD_E2E_CODE with
 * examples/worker.php as a pool handler (e2e/pool_test.go starts one, with
 * a scheduler poll of a minute: a task done sooner was woken through Redis).
 */
final class EndToEndTest extends TestCase
{
    public function testSubmittedTasksRunOnThePool(): void
    {
        $pdo = Env::pdo();
        $code = getenv('TASKD_E2E_CODE');
        if ($pdo === null || !$code) {
            self::markTestSkipped('no running daemon (TASKD_E2E_CODE and DB_DATABASE unset)');
        }
        $redis = Env::redis();
        if ($redis instanceof \Redis) {
            // Laravel's client puts its own prefix before every key and
            // channel: the wakeup must still reach the schedulers.
            $redis->setOption(\Redis::OPT_PREFIX, 'laravel_database_');
        }
        $producer = new TaskProducer($pdo, $redis, Env::prefix());
        // Without phpredis nothing wakes the schedulers: wait for a poll.
        $within = $redis === null ? 90.0 : 20.0;

        $ok = $producer->submit($code, ['greeting' => 'héllo'], ['unique_key' => 'e2e-' . bin2hex(random_bytes(4))]);
        $row = Env::waitStatus($pdo, $ok, [3], $within);
        if ($redis instanceof \Redis) {
            self::assertSame('laravel_database_', $redis->getOption(\Redis::OPT_PREFIX), "the client's prefix is left as it was");
        }
        $result = json_decode(substr($row['last_result'], strrpos("\n" . $row['last_result'], "\n")), true);
        self::assertSame($ok, $result['id']);
        self::assertSame(['greeting' => 'héllo'], $result['payload']);
        self::assertStringContainsString("handled task $ok", $row['last_result']);

        $failed = $producer->submit($code, ['fail' => 'card declined'], ['max_retry' => 0]);
        $row = Env::waitStatus($pdo, $failed, [5], $within);
        self::assertStringContainsString('RuntimeException: card declined', $row['last_result']);
    }
}
