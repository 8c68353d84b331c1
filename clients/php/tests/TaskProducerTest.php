<?php
declare(strict_types=1);

namespace Taskd\Tests;

use InvalidArgumentException;
use PDO;
use PHPUnit\Framework\TestCase;
use Taskd\TaskProducer;

/** Against a migrated task center (DB_* variables, see Env). */
final class TaskProducerTest extends TestCase
{
    private PDO $pdo;
    private TaskProducer $producer;

    protected function setUp(): void
    {
        $pdo = Env::pdo();
        if ($pdo === null) {
            self::markTestSkipped('DB_DATABASE is not set: no task center to write to');
        }
        $this->pdo = $pdo;
        $this->producer = new TaskProducer($pdo);
    }

    /** A task code of this run only, so that runs do not see each other's rows. */
    private function code(string $name): string
    {
        static $run = null;
        $run ??= bin2hex(random_bytes(4));

        return "{$name}_{$run}";
    }

    private function dbNow(): float
    {
        return (float) $this->pdo->query('SELECT UNIX_TIMESTAMP(NOW(3))')->fetchColumn();
    }

    private function dueIn(array $row): float
    {
        $stmt = $this->pdo->prepare('SELECT UNIX_TIMESTAMP(?) - UNIX_TIMESTAMP(NOW(3))');
        $stmt->execute([$row['plan_next_run_at']]);

        return (float) $stmt->fetchColumn();
    }

    public function testDelayWritesTheSeedColumns(): void
    {
        $id = $this->producer->delay($this->code('php_lib_delay'), 30, ['to' => 'a@example.com', 'name' => 'Zoë'], 2, 60, 1);
        $row = Env::task($this->pdo, $id);
        self::assertSame($this->code('php_lib_delay'), $row['task_code']);
        self::assertSame(0, (int) $row['task_type']);
        self::assertSame(['to' => 'a@example.com', 'name' => 'Zoë'], json_decode($row['payload'], true));
        // No payload is {}; a list stays a list.
        self::assertSame('{}', Env::task($this->pdo, $this->producer->submit($this->code('php_lib_delay'), []))['payload']);
        self::assertSame('[1,2,3]', Env::task($this->pdo, $this->producer->submit($this->code('php_lib_delay'), [1, 2, 3]))['payload']);
        self::assertSame(2, (int) $row['priority']);
        self::assertSame(30, (int) $row['delay']);
        self::assertSame(60, (int) $row['timeout']);
        self::assertSame(1, (int) $row['max_retry']);
        self::assertSame(0, (int) $row['status']);
        self::assertSame('', $row['queue']);
        self::assertSame(null, $row['unique_key']);
        // The database's clock, whatever PHP's time zone.
        self::assertEqualsWithDelta(30.0, $this->dueIn($row), 5.0);
    }

    public function testSubmitWithOptions(): void
    {
        $id = $this->producer->submit($this->code('php_lib_submit'), ['n' => 1], [
            'unique_key' => 'order-42', 'priority' => 0, 'timeout' => 5, 'max_retry' => 0, 'queue' => 'bulk',
        ]);
        $row = Env::task($this->pdo, $id);
        self::assertSame('order-42', $row['unique_key']);
        self::assertSame('bulk', $row['queue']);
        self::assertSame(0, (int) $row['priority']);
        self::assertFalse($this->producer->lastExisted());
        self::assertEqualsWithDelta(0.0, $this->dueIn($row), 5.0);

        // The same key again: the first task, nothing new.
        $again = $this->producer->submit($this->code('php_lib_submit'), ['n' => 2], ['unique_key' => 'order-42']);
        self::assertSame($id, $again);
        self::assertTrue($this->producer->lastExisted());
        self::assertSame(['n' => 1], json_decode(Env::task($this->pdo, $id)['payload'], true));
        // Another code may use the same key.
        self::assertNotSame($id, $this->producer->submit($this->code('php_lib_other'), [], ['unique_key' => 'order-42']));
    }

    public function testGroup(): void
    {
        $id = $this->producer->submit($this->code('php_lib_group'), [], ['group' => 'tenant-7 (eu)']);
        self::assertSame('tenant-7 (eu)', Env::task($this->pdo, $id)['group_key']);
        // Lengths in characters, as the columns count them.
        $zh = str_repeat('租', 64);
        $key = str_repeat('订', 191);
        $id = $this->producer->submit($this->code('php_lib_group'), [], ['group' => $zh, 'unique_key' => $key]);
        self::assertSame($zh, Env::task($this->pdo, $id)['group_key']);
        self::assertSame($key, Env::task($this->pdo, $id)['unique_key']);
        foreach (["tab\there", ' lead', str_repeat('g', 65), $zh . '租', "\xc4\xe3\xba\xc3"] as $bad) {
            try {
                $this->producer->submit($this->code('php_lib_group'), [], ['group' => $bad]);
                self::fail('group ' . bin2hex($bad) . ' accepted');
            } catch (InvalidArgumentException $e) {
                self::assertStringContainsString('group', $e->getMessage());
            }
        }
    }

    /** A connection that is not utf8mb4 gets ASCII through, and is told about anything else. */
    public function testConnectionCharset(): void
    {
        foreach (['latin1', 'utf8'] as $charset) {
            $producer = new TaskProducer(Env::pdo($charset));
            $id = $producer->submit($this->code('php_lib_charset'), ['to' => 'a@example.com']);
            self::assertSame(['to' => 'a@example.com'], json_decode(Env::task($this->pdo, $id)['payload'], true));
            foreach ([[['text' => '发送短信'], []], [[], ['group' => '租户']], [[], ['unique_key' => 'gift-😀']]] as [$payload, $options]) {
                try {
                    $producer->submit($this->code('php_lib_charset'), $payload, $options);
                    self::fail("$charset: text beyond ASCII accepted");
                } catch (\LogicException $e) {
                    self::assertStringContainsString("the PDO connection talks $charset", $e->getMessage());
                }
            }
        }
        $id = $this->producer->submit($this->code('php_lib_charset'), ['text' => '发送短信 😀']);
        self::assertSame('发送短信 😀', json_decode(Env::task($this->pdo, $id)['payload'], true)['text']);
    }

    /**
     * A code that differs from the key holder's only in case is refused in
     * every mode, and the holder's task is left as it was: the unique
     * index folds case, task codes do not.
     */
    public function testCodesOnlyCaseApartAreRefused(): void
    {
        $code = $this->code('php_lib_case');
        $id = $this->producer->submit($code, ['v' => 1], ['unique_key' => 'k1', 'delay' => 3600]);
        foreach (['reject', 'replace', 'until-done'] as $mode) {
            try {
                $this->producer->submit(strtoupper($code), ['v' => 2], ['unique_key' => 'k1', 'on_conflict' => $mode]);
                self::fail("$mode: a code that differs only in case took the key");
            } catch (InvalidArgumentException $e) {
                self::assertStringContainsString(sprintf('unique key "k1" is held by task %d of code "%s"', $id, $code), $e->getMessage());
            }
        }
        self::assertSame(['v' => 1], json_decode(Env::task($this->pdo, $id)['payload'], true));
        $this->pdo->prepare('UPDATE task_center SET status = 3 WHERE id = ?')->execute([$id]);
        try {
            $this->producer->submit(strtoupper($code), ['v' => 3], ['unique_key' => 'k1', 'on_conflict' => 'until-done']);
            self::fail('until-done took over the key of an ended task of another code');
        } catch (InvalidArgumentException $e) {
            self::assertStringContainsString('which the task center does not tell apart', $e->getMessage());
        }
        self::assertSame('k1', Env::task($this->pdo, $id)['unique_key'], 'the ended task keeps its key');
    }

    /**
     * The same for a periodic task: cron() of a code that differs from a
     * periodic task's only in case, under that task's name, is refused, and
     * the task keeps its code, definition and next run (the upsert took it
     * over: rewrote it and returned its id).
     */
    public function testCronCodesOnlyCaseApartAreRefused(): void
    {
        $code = $this->code('php_lib_cron_case');
        // Once a year: a running daemon does not run them meanwhile.
        $byCode = $this->producer->cron($code, '0 3 1 1 *', ['v' => 1], 5, 300, 3, ['timezone' => 'UTC']);
        $named = $this->producer->cron($code, '0 3 1 1 *', ['v' => 1], 5, 300, 3, ['timezone' => 'UTC', 'name' => 'nightly']);
        $before = [$byCode => Env::task($this->pdo, $byCode), $named => Env::task($this->pdo, $named)];
        foreach ([[strtoupper($code), $code, $byCode], [ucfirst($code), $code, $byCode], [strtoupper($code), 'nightly', $named]] as [$other, $name, $id]) {
            try {
                $this->producer->cron($other, '*/5 * * * *', ['v' => 2], 1, 60, 0,
                    ['name' => $name, 'timezone' => 'Europe/Berlin', 'queue' => 'php_lib_cron_case_q']);
                self::fail("$other: a code that differs only in case took periodic task $name of $code");
            } catch (InvalidArgumentException $e) {
                self::assertStringContainsString(sprintf('unique key "cron:%s" is held by task %d of code "%s", which the task center does not tell apart from "%s"',
                    $name, $id, $code, $other), $e->getMessage());
            }
            foreach ($before as $i => $row) {
                self::assertSame($row, Env::task($this->pdo, $i), "$other, $name: task $i of $code is left as it was");
            }
        }
        // Its own spelling still updates it.
        self::assertSame($named, $this->producer->cron($code, '0 4 1 1 *', ['v' => 3], 5, 300, 3, ['timezone' => 'UTC', 'name' => 'nightly']));
        self::assertTrue($this->producer->lastExisted());
        self::assertSame('0 4 1 1 *', Env::task($this->pdo, $named)['cron_expr']);
    }

    public function testOnConflict(): void
    {
        $code = $this->code('php_lib_conflict');
        // replace: a waiting task takes the new payload and due time.
        $id = $this->producer->submit($code, ['v' => 1], ['unique_key' => 'k1', 'delay' => 3600]);
        self::assertSame($id, $this->producer->submit($code, ['v' => 2], ['unique_key' => 'k1', 'on_conflict' => 'replace']));
        self::assertTrue($this->producer->lastExisted());
        self::assertTrue($this->producer->lastChanged());
        $row = Env::task($this->pdo, $id);
        self::assertSame(['v' => 2], json_decode($row['payload'], true));
        self::assertEqualsWithDelta(0.0, $this->dueIn($row), 5.0);
        // A failed run's retry keeps its occurrence's time (scheduled_at);
        // a replace makes a new occurrence, with no such time. The retry is
        // not due yet: a running daemon (the e2e suite runs one) would
        // otherwise claim it before the replace, which then changes nothing.
        $this->pdo->prepare('UPDATE task_center SET status = 4, scheduled_at = NOW(3) - INTERVAL 1 DAY,
            plan_next_run_at = NOW(3) + INTERVAL 1 HOUR WHERE id = ?')->execute([$id]);
        $this->producer->submit($code, ['v' => 2], ['unique_key' => 'k1', 'on_conflict' => 'replace']);
        self::assertNull(Env::task($this->pdo, $id)['scheduled_at'], 'replace starts a new occurrence');
        // A running task is never changed.
        $this->pdo->prepare('UPDATE task_center SET status = 2 WHERE id = ?')->execute([$id]);
        $this->producer->submit($code, ['v' => 3], ['unique_key' => 'k1', 'on_conflict' => 'replace']);
        self::assertFalse($this->producer->lastChanged());
        self::assertSame(['v' => 2], json_decode(Env::task($this->pdo, $id)['payload'], true));

        // debounce: due a debounce after the first submit and after each
        // later one.
        $d = $this->producer->submit($code, ['n' => 1], ['unique_key' => 'k2', 'on_conflict' => 'debounce', 'debounce' => 60]);
        self::assertEqualsWithDelta(60.0, $this->dueIn(Env::task($this->pdo, $d)), 5.0);
        $this->pdo->prepare('UPDATE task_center SET plan_next_run_at = NOW(3) + INTERVAL 10 SECOND, scheduled_at = NOW(3) WHERE id = ?')->execute([$d]);
        self::assertSame($d, $this->producer->submit($code, ['n' => 2], ['unique_key' => 'k2', 'on_conflict' => 'debounce', 'debounce' => 60]));
        self::assertTrue($this->producer->lastChanged());
        $row = Env::task($this->pdo, $d);
        self::assertSame(['n' => 2], json_decode($row['payload'], true));
        self::assertEqualsWithDelta(60.0, $this->dueIn($row), 5.0);
        self::assertNull($row['scheduled_at'], 'debounce starts a new occurrence');

        // until-done: a new task once the holder has ended.
        $u = $this->producer->submit($code, [], ['unique_key' => 'k3', 'on_conflict' => 'until-done']);
        self::assertSame($u, $this->producer->submit($code, [], ['unique_key' => 'k3', 'on_conflict' => 'until-done']));
        $this->pdo->prepare('UPDATE task_center SET status = 3 WHERE id = ?')->execute([$u]);
        $next = $this->producer->submit($code, [], ['unique_key' => 'k3', 'on_conflict' => 'until-done']);
        self::assertNotSame($u, $next);
        self::assertFalse($this->producer->lastExisted());
        self::assertSame('k3', Env::task($this->pdo, $u)['released_key']);
        self::assertSame('k3', Env::task($this->pdo, $next)['unique_key']);

        foreach ([['on_conflict' => 'sometimes', 'unique_key' => 'x'], ['on_conflict' => 'replace'],
            ['on_conflict' => 'debounce', 'unique_key' => 'x'], ['debounce' => 5, 'unique_key' => 'x']] as $bad) {
            try {
                $this->producer->submit($code, [], $bad);
                self::fail('accepted ' . json_encode($bad));
            } catch (InvalidArgumentException $e) {
                self::assertNotSame('', $e->getMessage());
            }
        }
    }

    public function testUniqueKeysCompareExactly(): void
    {
        // Look-alikes the old collation took for one key: case, and any
        // two characters outside the Basic Multilingual Plane.
        $pairs = [['order-abc', 'order-ABC'], ['gift-🐶', 'gift-😀'], ['名-𠮷', '名-𩸽']];
        foreach (['reject', 'replace', 'debounce', 'until-done'] as $mode) {
            $code = $this->code('php_lib_exact_' . str_replace('-', '_', $mode));
            $options = ['on_conflict' => $mode, 'delay' => 3600] + ($mode === 'debounce' ? ['debounce' => 60] : []);
            foreach ($pairs as $pair) {
                $ids = [];
                foreach ($pair as $key) {
                    $ids[$key] = $this->producer->submit($code, [], ['unique_key' => $key] + $options);
                    self::assertFalse($this->producer->lastExisted(), "$mode: $key");
                }
                self::assertNotSame($ids[$pair[0]], $ids[$pair[1]], "$mode: $pair[0] and $pair[1]");
                foreach ($ids as $key => $id) {
                    self::assertSame($id, $this->producer->submit($code, [], ['unique_key' => $key] + $options), "$mode: $key again");
                    self::assertTrue($this->producer->lastExisted(), "$mode: $key again");
                    self::assertSame((string) $key, Env::task($this->pdo, $id)['unique_key']);
                }
            }
        }

        // until-done hands over exactly the ended task's key.
        $code = $this->code('php_lib_exact_handover');
        $dog = $this->producer->submit($code, [], ['unique_key' => 'gift-🐶', 'on_conflict' => 'until-done']);
        $smile = $this->producer->submit($code, [], ['unique_key' => 'gift-😀', 'on_conflict' => 'until-done']);
        $this->pdo->prepare('UPDATE task_center SET status = 3 WHERE id = ?')->execute([$dog]);
        $next = $this->producer->submit($code, [], ['unique_key' => 'gift-🐶', 'on_conflict' => 'until-done']);
        self::assertNotSame($dog, $next);
        self::assertNotSame($smile, $next);
        self::assertSame('gift-🐶', Env::task($this->pdo, $dog)['released_key']);
        self::assertSame('gift-😀', Env::task($this->pdo, $smile)['unique_key']);
    }

    public function testAt(): void
    {
        $at = (new \DateTimeImmutable('@' . (int) $this->dbNow()))->modify('+1 hour');
        $id = $this->producer->at($this->code('php_lib_at'), $at, ['k' => 'v'], ['priority' => 7]);
        $row = Env::task($this->pdo, $id);
        self::assertSame(2, (int) $row['task_type']);
        self::assertSame(7, (int) $row['priority']);
        self::assertEqualsWithDelta(3600.0, $this->dueIn($row), 5.0);
    }

    public function testCronUpsertsByName(): void
    {
        $id = $this->producer->cron($this->code('php_lib_cron'), '0 3 * * *', ['report' => 'daily'], 5, 300, 3, ['timezone' => 'UTC']);
        $row = Env::task($this->pdo, $id);
        self::assertSame(1, (int) $row['task_type']);
        self::assertSame('0 3 * * *', $row['cron_expr']);
        self::assertSame('cron:' . $this->code('php_lib_cron'), $row['unique_key']);
        self::assertSame('UTC', $row['timezone']);
        $due = $this->dueIn($row);
        self::assertGreaterThan(0.0, $due);
        self::assertTrue($due <= 86400.0, "due in $due s");
        self::assertSame(3, (int) (new \DateTimeImmutable('@' . (int) ($this->dbNow() + $due + 0.5)))->format('G'));

        // A deploy running it again updates the one task, as `taskd cron
        // add` does: a changed schedule moves a waiting run to its own next
        // occurrence.
        $again = $this->producer->cron($this->code('php_lib_cron'), '*/5 * * * *', ['report' => 'often'], 5, 300, 3, ['timezone' => 'UTC']);
        self::assertSame($id, $again);
        self::assertTrue($this->producer->lastExisted());
        $row = Env::task($this->pdo, $id);
        self::assertSame('*/5 * * * *', $row['cron_expr']);
        self::assertSame(['report' => 'often'], json_decode($row['payload'], true));
        self::assertTrue($this->dueIn($row) <= 300.0);
        self::assertNull($row['scheduled_at'], 'a new occurrence');

        // What an operator or a failure did stays: a disabled task stays
        // disabled, a failed run keeps its retry, an overdue occurrence of
        // the same schedule stays due.
        foreach ([[6, 'INTERVAL 1 HOUR'], [4, 'INTERVAL 90 SECOND'], [0, '- INTERVAL 1 HOUR']] as [$status, $due]) {
            $at = str_starts_with($due, '-') ? "NOW(3) $due" : "NOW(3) + $due";
            $this->pdo->prepare("UPDATE task_center SET status = ?, plan_next_run_at = $at WHERE id = ?")->execute([$status, $id]);
            $before = Env::task($this->pdo, $id)['plan_next_run_at'];
            $this->producer->cron($this->code('php_lib_cron'), '*/5 * * * *', ['report' => 'often'], 5, 300, 3, ['timezone' => 'UTC']);
            $row = Env::task($this->pdo, $id);
            self::assertSame($status, (int) $row['status'], "status $status kept");
            self::assertSame($before, $row['plan_next_run_at'], "status $status keeps its next run");
        }
        // Another name is another task.
        self::assertNotSame($id, $this->producer->cron($this->code('php_lib_cron'), '@hourly', [], 5, 300, 3, ['name' => 'second']));
    }

    public function testChildrenAreTheChain(): void
    {
        $id = $this->producer->submit($this->code('php_lib_parent'), ['month' => 5], ['children' => [
            ['code' => 'mail_report', 'priority' => 2, 'children' => [['code' => 'archive_report', 'delay' => 60]]],
            ['code' => 'notify', 'queue' => 'fast'],
        ]]);
        $row = Env::task($this->pdo, $id);
        // The shape taskd reads (task.Child): code, queue, priority,
        // timeout, max_retry, delay_ms, then.
        self::assertSame([
            ['code' => 'mail_report', 'priority' => 2, 'timeout' => 300, 'max_retry' => 3,
                'then' => [['code' => 'archive_report', 'priority' => 5, 'timeout' => 300, 'max_retry' => 3, 'delay_ms' => 60000]]],
            ['code' => 'notify', 'priority' => 5, 'timeout' => 300, 'max_retry' => 3, 'queue' => 'fast'],
        ], json_decode($row['then_spec'], true));
    }

    public function testBatch(): void
    {
        $code = $this->code('php_lib_member');
        $b = $this->producer->batch([
            ['code' => $code, 'payload' => ['to' => 'a@example.com']],
            ['code' => $code, 'payload' => ['to' => 'b@example.com'], 'max_retry' => 0, 'delay' => 30],
        ], $this->code('php_lib_done'), ['campaign' => 7], ['priority' => 1]);
        self::assertCount(2, $b['member_ids']);
        $stmt = $this->pdo->prepare('SELECT total, callback_code, callback_priority, callback_payload, finished_at FROM task_batch WHERE id = ?');
        $stmt->execute([$b['batch_id']]);
        $batch = $stmt->fetch(PDO::FETCH_ASSOC);
        self::assertSame(2, (int) $batch['total']);
        self::assertSame($this->code('php_lib_done'), $batch['callback_code']);
        self::assertSame(1, (int) $batch['callback_priority']);
        self::assertSame(['campaign' => 7], json_decode($batch['callback_payload'], true));
        self::assertSame(null, $batch['finished_at']);
        foreach ($b['member_ids'] as $i => $id) {
            $row = Env::task($this->pdo, $id);
            self::assertSame($b['batch_id'], (int) $row['batch_id']);
            self::assertSame($code, $row['task_code']);
        }
        self::assertSame(0, (int) Env::task($this->pdo, $b['member_ids'][1])['max_retry']);
        self::assertSame(30, (int) Env::task($this->pdo, $b['member_ids'][1])['delay']);
    }

    /**
     * submitMany() writes hundreds of rows per INSERT and numbers them
     * from each statement's first id: every id must be its own task's,
     * across the 500-row limit, a change of columns (queue, children) and
     * the bytes limit.
     */
    public function testSubmitMany(): void
    {
        $code = $this->code('php_lib_many');
        $tasks = [];
        for ($i = 0; $i < 1203; $i++) {
            $t = ['code' => $code, 'payload' => ['n' => $i]];
            if ($i >= 700 && $i < 710) {
                $t['queue'] = $this->code('php_lib_many_q');
            }
            if ($i === 900) {
                $t['children'] = [['code' => $code]];
                $t['delay'] = 60;
            }
            $tasks[] = $t;
        }
        $ids = $this->producer->submitMany($tasks);
        self::assertCount(1203, $ids);
        $stmt = $this->pdo->prepare('SELECT id, JSON_VALUE(payload, "$.n") AS n, queue, then_spec IS NOT NULL AS children, delay, status
            FROM task_center WHERE task_code = ? ORDER BY id');
        $stmt->execute([$code]);
        $rows = $stmt->fetchAll(PDO::FETCH_ASSOC);
        self::assertCount(1203, $rows);
        $byID = array_column($rows, null, 'id');
        foreach ($ids as $i => $id) {
            self::assertTrue(isset($byID[$id]), "task $i: id $id is not a task of the list");
            self::assertSame($i, (int) $byID[$id]['n'], "task $i has id $id");
            self::assertSame($i >= 700 && $i < 710 ? $this->code('php_lib_many_q') : '', $byID[$id]['queue'] ?? '', "task $i");
            self::assertSame($i === 900 ? 1 : 0, (int) $byID[$id]['children'], "task $i");
            self::assertSame($i === 900 ? 60 : 0, (int) $byID[$id]['delay'], "task $i");
            self::assertSame(0, (int) $byID[$id]['status']);
        }

        // Past the bytes one statement carries: 12 payloads of 700 KiB.
        $big = $this->code('php_lib_many_big');
        $tasks = [];
        for ($i = 0; $i < 12; $i++) {
            $tasks[] = ['code' => $big, 'payload' => ['n' => $i, 'blob' => str_repeat('x', 700 << 10)]];
        }
        foreach ($this->producer->submitMany($tasks) as $i => $id) {
            self::assertSame($i, json_decode(Env::task($this->pdo, $id)['payload'], true)['n']);
        }
    }

    /** One bad task, even the last, writes nothing. */
    public function testSubmitManyAllOrNothing(): void
    {
        $code = $this->code('php_lib_many_bad');
        $tasks = array_fill(0, 999, ['code' => $code, 'payload' => ['ok' => true]]);
        $tasks[] = ['code' => $code, 'priority' => 10];
        try {
            $this->producer->submitMany($tasks);
            self::fail('no exception');
        } catch (InvalidArgumentException $e) {
            self::assertSame('priority 10 is out of range 0-9', $e->getMessage());
        }
        // A string is no number, a negative delay is said so, a key that
        // is not UTF-8 is said to be that.
        foreach ([
            [['priority' => '1'], 'priority "1" is not an integer'],
            [['delay' => -5], 'delay -5 is less than 0'],
            [['unique_key' => "\xff\xfe"], 'unique key is not UTF-8'],
            [['unique_key' => str_repeat('k', 192)], 'unique key is longer than 191 characters'],
        ] as [$options, $want]) {
            try {
                $this->producer->submit($code, [], $options);
                self::fail('no exception: ' . $want);
            } catch (InvalidArgumentException $e) {
                self::assertSame($want, $e->getMessage());
            }
        }
        $tasks[999] = ['code' => $code, 'uniqe_key' => 'k'];
        try {
            $this->producer->submitMany($tasks);
            self::fail('no exception');
        } catch (InvalidArgumentException $e) {
            self::assertStringContainsString('uniqe_key', $e->getMessage());
        }
        $stmt = $this->pdo->prepare('SELECT COUNT(*) FROM task_center WHERE task_code = ?');
        $stmt->execute([$code]);
        self::assertSame(0, (int) $stmt->fetchColumn());
    }

    public function testRejectsBadInput(): void
    {
        $cases = [
            fn () => $this->producer->submit('bad code', []),
            fn () => $this->producer->submit('', []),
            fn () => $this->producer->submit('ok', [], ['priority' => 10]),
            fn () => $this->producer->submit('ok', [], ['timeout' => 0]),
            fn () => $this->producer->submit('ok', [], ['max_retry' => -1]),
            fn () => $this->producer->submit('ok', [], ['uniq_key' => 'typo']),
            fn () => $this->producer->submit('ok', [], ['queue' => 'a/b']),
            fn () => $this->producer->submit('ok', [], ['unique_key' => str_repeat('k', 192)]),
            fn () => $this->producer->submit('ok', [], ['unique_key' => 'order-42 ']),
            fn () => $this->producer->submit('ok', [], ['unique_key' => "\torder-42"]),
            fn () => $this->producer->submit('ok', [], ['unique_key' => "订单\u{3000}"]),
            fn () => $this->producer->submit('ok', ['bad' => "\xB1\x31"]),
            fn () => $this->producer->submit('ok', [], ['delay' => 5, 'at' => new \DateTimeImmutable()]),
            fn () => $this->producer->delay('ok', -1, []),
            fn () => $this->producer->cron('ok', '61 * * * *', []),
            fn () => $this->producer->submit('ok', [], ['children' => [['code' => 'bad code']]]),
            fn () => $this->producer->submit('ok', [], ['children' => [['code' => 'b', 'prio' => 1]]]),
            fn () => $this->producer->submit('ok', [], ['children' => 'b']),
            fn () => $this->producer->batch([], 'done'),
            fn () => $this->producer->batch([['code' => 'ok']], 'bad code'),
            fn () => $this->producer->batch([['code' => 'ok'], ['payload' => []]], 'done'),
            fn () => $this->producer->batch([['code' => 'ok']], 'done', ['batch' => 1]),
            fn () => $this->producer->batch([['code' => 'ok']], 'done', ['a', 'b']),
        ];
        $before = (int) $this->pdo->query('SELECT COUNT(*) FROM task_center')->fetchColumn();
        foreach ($cases as $i => $case) {
            try {
                $case();
                self::fail("case $i was accepted");
            } catch (InvalidArgumentException $e) {
                self::assertTrue($e->getMessage() !== '', "case $i");
            }
        }
        self::assertSame($before, (int) $this->pdo->query('SELECT COUNT(*) FROM task_center')->fetchColumn(), 'nothing written');
    }
}
