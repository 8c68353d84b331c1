<?php
declare(strict_types=1);

namespace Taskd;

use DateTimeInterface;
use InvalidArgumentException;
use PDO;
use PDOException;

/**
 * Submits tasks to the task center with one INSERT each, as the seed
 * design's TaskProducer did: cron() and delay() keep its signatures; at()
 * and submit() add a time, a unique key, a queue.
 *
 * It writes the seed's columns (task_code, task_type, payload, cron_expr,
 * priority, delay, timeout, max_retry, plan_next_run_at, status) and, only
 * when asked for, unique_key, queue and timezone, which every taskd schema
 * has: so it works whatever the daemon's version is. Due times come from
 * the database's clock (NOW(3), FROM_UNIXTIME), never PHP's, so PHP's
 * date.timezone does not matter.
 *
 * With a phpredis client it publishes a wakeup, so a task due now starts
 * at once instead of at the schedulers' next probe (scheduler.probe_interval).
 */
final class TaskProducer
{
    public const MAX_PRIORITY = 9;
    public const MAX_RETRY = 100;
    public const MAX_TIMEOUT = 7 * 24 * 3600;
    public const MAX_UNIQUE_KEY = 191;
    public const MAX_PAYLOAD = 1 << 20;

    /** Options submit() and at() accept; unknown ones are an error. */
    private const OPTIONS = ['unique_key', 'on_conflict', 'debounce', 'debounce_max', 'group', 'priority', 'timeout',
        'max_retry', 'queue', 'delay', 'at', 'children'];

    /** Modes of the on_conflict option. */
    public const ON_CONFLICT = ['reject', 'replace', 'debounce', 'until-done'];

    /** A debounced task waits at most this many times the debounce, unless debounce_max says. */
    public const DEBOUNCE_MAX_FACTOR = 10;

    public const MAX_GROUP = 64;

    /** Keys of a child (see submit()'s children option). */
    private const CHILD = ['code', 'priority', 'timeout', 'max_retry', 'queue', 'delay', 'children'];

    /** A re-added periodic task that keeps its status and next run (SQL, on the old row). */
    private const KEEPS_ITS_RUN = 'status IN (1, 2, 4, 6) OR (status = 0 AND cron_expr <=> VALUES(cron_expr) AND timezone <=> VALUES(timezone))';

    /** Keys of a batch member (see batch()). */
    private const MEMBER = ['code', 'payload', 'priority', 'timeout', 'max_retry', 'queue', 'delay', 'children'];

    /** At most this many children in one submission, over the whole tree. */
    public const MAX_CHILDREN = 100;

    /** At most this many members in one batch, or tasks in one submitMany(). */
    public const MAX_BATCH = 100000;

    /**
     * Rows one INSERT of many carries at most, and the bytes of their
     * payloads: under max_allowed_packet (16 MiB by default in MariaDB)
     * once escaping has doubled them.
     */
    private const INSERT_ROWS = 500;
    private const INSERT_BYTES = 4 << 20;

    private bool $lastExisted = false;

    private bool $lastChanged = false;

    /** The connection's character set, read at the first text that needs it. */
    private ?string $charset = null;

    /** Whether task_center has scheduled_at (migration 14), read at the first write that moves a due time. */
    private ?bool $scheduledAt = null;

    /**
     * @param PDO         $pdo         the task center (for Laravel: DB::connection()->getPdo())
     * @param \Redis|null $redis       a phpredis client, to wake the schedulers
     * @param string      $redisPrefix the daemons' redis.prefix
     */
    public function __construct(
        private PDO $pdo,
        private ?object $redis = null,
        private string $redisPrefix = 'task:',
    ) {
        $this->pdo->setAttribute(PDO::ATTR_ERRMODE, PDO::ERRMODE_EXCEPTION);
    }

    /**
     * A periodic task (the seed's signature). $cronExpr has five fields, or
     * six with seconds first, or a descriptor (@hourly, @every 5m). Calling
     * it again for the same code (and $options['name']) updates the task
     * instead of adding one, as `taskd cron add` does, so a deploy script
     * can run it on every release. The first run is the expression's next
     * occurrence after now (database clock) in $options['timezone'] (default
     * PHP's date.timezone).
     *
     * @param array{name?: string, timezone?: string, queue?: string} $options
     * @return int the task's id
     */
    public function cron(string $taskCode, string $cronExpr, array $payload, int $priority = 5, int $timeout = 300, int $maxRetry = 3, array $options = []): int
    {
        self::checkOptions($options, ['name', 'timezone', 'queue']);
        $tz = (string) ($options['timezone'] ?? date_default_timezone_get());
        $name = (string) ($options['name'] ?? $taskCode);
        $schedule = CronSchedule::parse($cronExpr, $tz);
        $now = (float) $this->pdo->query('SELECT UNIX_TIMESTAMP(NOW(3))')->fetchColumn();
        $next = $schedule->next($now);
        $row = $this->row($taskCode, $payload, [
            'priority' => $priority, 'timeout' => $timeout, 'max_retry' => $maxRetry,
            'unique_key' => 'cron:' . $name, 'queue' => $options['queue'] ?? '',
        ]);
        $row['task_type'] = 1;
        $row['cron_expr'] = trim($cronExpr);
        $row['timezone'] = $tz;
        // The upsert below would take over, and rewrite, a periodic task of
        // a code that differs only in case (the unique index folds it):
        // refused, as submit() and `taskd cron add` refuse it.
        $this->holder($taskCode, (string) $row['unique_key']);
        [$columns, $values] = self::split($row);
        $sql = sprintf(
            'INSERT INTO task_center (%s, plan_next_run_at) VALUES (%s, FROM_UNIXTIME(?))'
            // As `taskd cron add` does: a run in flight, a failed run
            // waiting for its retry, a task an operator disabled and an
            // overdue occurrence of the same schedule keep their state and
            // time; the new definition applies from the next run. The time
            // and status are decided before the schedule is assigned (left
            // to right), on the old one.
            . ' ON DUPLICATE KEY UPDATE id = LAST_INSERT_ID(id),'
            . $this->newOccurrence('IF(' . self::KEEPS_ITS_RUN . ', scheduled_at, NULL)')
            . ' plan_next_run_at = IF(' . self::KEEPS_ITS_RUN . ', plan_next_run_at, VALUES(plan_next_run_at)),'
            . ' status = IF(status IN (1, 2, 4, 6), status, 0),'
            . ' cron_expr = VALUES(cron_expr), timezone = VALUES(timezone), payload = VALUES(payload), queue = VALUES(queue),'
            . ' priority = VALUES(priority), timeout = VALUES(timeout), max_retry = VALUES(max_retry), task_type = 1',
            implode(', ', $columns),
            implode(', ', array_fill(0, count($columns), '?')),
        );
        $stmt = $this->pdo->prepare($sql);
        $stmt->execute([...$values, sprintf('%.3F', $next)]);
        $this->lastExisted = $stmt->rowCount() !== 1;
        $this->wake(max(0.0, $next - $now));

        return (int) $this->pdo->lastInsertId();
    }

    /**
     * A one-off task run after $delaySeconds (0: now); the seed's signature.
     *
     * @return int the task's id
     */
    public function delay(string $taskCode, int $delaySeconds, array $payload, int $priority = 5, int $timeout = 300, int $maxRetry = 3): int
    {
        return $this->submit($taskCode, $payload, [
            'delay' => $delaySeconds, 'priority' => $priority, 'timeout' => $timeout, 'max_retry' => $maxRetry,
        ]);
    }

    /**
     * A one-off task run at $runAt (a time in the past means now).
     *
     * @param array<string, mixed> $options as for submit()
     * @return int the task's id
     */
    public function at(string $taskCode, DateTimeInterface $runAt, array $payload, array $options = []): int
    {
        return $this->submit($taskCode, $payload, ['at' => $runAt] + $options);
    }

    /**
     * A one-off task. Options:
     *   unique_key  string  at most one task per code and key: a second
     *                       submit returns the first task's id (see
     *                       lastExisted()), or does what on_conflict says
     *   on_conflict string  what a submit does when a task holds its
     *                       unique key: 'reject' (default: nothing),
     *                       'replace' (a waiting task takes this payload
     *                       and due time), 'debounce' (the same, and its
     *                       due time moves out to 'debounce' seconds from
     *                       now, at most 'debounce_max' seconds, default
     *                       10 times the debounce, after its first
     *                       submit), 'until-done' (a new task once that
     *                       one has ended); a dispatched or running task
     *                       is never changed (see lastChanged())
     *   debounce    int     seconds, with on_conflict 'debounce'
     *   debounce_max int    seconds, with on_conflict 'debounce'
     *   group       string  the task's group (a tenant, a customer): the
     *                       queue's per-group limits and serial order
     *                       apply to each group separately (needs taskd's
     *                       schema 7 or later)
     *   priority    int     0 (highest) to 9, default 5
     *   timeout     int     seconds per attempt, default 300
     *   max_retry   int     retries after a failed attempt, default 3
     *   queue       string  default: the handler's configured queue, else the code
     *   delay       int     seconds from now
     *   at          DateTimeInterface  when (instead of delay)
     *   children    list    tasks to submit when this one succeeds, each
     *                       ['code' => ..., 'priority', 'timeout',
     *                       'max_retry', 'queue', 'delay' (seconds after the
     *                       success), 'children' => [...]]: a chain. taskd
     *                       creates them with the success, once, with this
     *                       task's result as their payload (needs taskd's
     *                       schema 5 or later)
     *
     * @param array<string, mixed> $options
     * @return int the task's id
     */
    public function submit(string $taskCode, array $payload = [], array $options = []): int
    {
        self::checkOptions($options, self::OPTIONS);
        if (isset($options['delay'], $options['at'])) {
            throw new InvalidArgumentException('give either a delay or a time, not both');
        }
        $row = $this->row($taskCode, $payload, $options);
        $row['task_type'] = 0;
        $mode = self::conflictMode($options, isset($row['unique_key']));
        $debounce = $mode === 'debounce' ? self::int($options, 'debounce', 1, PHP_INT_MAX) : 0;
        if ($debounce > 0 && !isset($options['at'])) {
            $options['delay'] = max($debounce, (int) ($options['delay'] ?? 0));
        }
        $due = 'NOW(3)';
        $args = [];
        $wakeIn = 0.0;
        if (isset($options['at'])) {
            if (!$options['at'] instanceof DateTimeInterface) {
                throw new InvalidArgumentException('option at must be a DateTimeInterface');
            }
            $row['task_type'] = 2;
            $at = (float) $options['at']->format('U.u');
            $due = 'FROM_UNIXTIME(?)';
            $args[] = sprintf('%.3F', $at);
            $wakeIn = max(0.0, $at - microtime(true));
        } elseif (isset($options['delay'])) {
            $delay = self::int($options, 'delay', 0, PHP_INT_MAX);
            $row['delay'] = $delay;
            $due = 'NOW(3) + INTERVAL ? SECOND';
            $args[] = $delay;
            $wakeIn = (float) $delay;
        }
        [$columns, $values] = self::split($row);
        $sql = sprintf(
            'INSERT INTO task_center (%s, plan_next_run_at) VALUES (%s, %s)',
            implode(', ', $columns),
            implode(', ', array_fill(0, count($columns), '?')),
            $due,
        );
        $this->lastExisted = false;
        $this->lastChanged = false;
        $insert = fn () => $this->pdo->prepare($sql)->execute([...$values, ...$args]);
        try {
            $insert();
        } catch (PDOException $e) {
            if (!isset($row['unique_key']) || !self::duplicate($e)) {
                throw $e;
            }
            $key = (string) $row['unique_key'];
            if ($mode === 'until-done' && ($id = $this->takeOver($taskCode, $key, $insert)) !== null) {
                $this->wake($wakeIn);

                return $id;
            }
            $id = $this->holder($taskCode, $key);
            if ($id === null) {
                throw $e; // deleted meanwhile
            }
            $this->lastExisted = true;
            if ($mode === 'replace' || $mode === 'debounce') {
                $maxWait = $mode === 'debounce'
                    ? self::int($options, 'debounce_max', $debounce, PHP_INT_MAX, self::DEBOUNCE_MAX_FACTOR * $debounce) : 0;
                $this->lastChanged = $this->changeWaiting($id, $mode, $row['payload'], $due, $args, $debounce, $maxWait);
                if ($this->lastChanged) {
                    $this->wake($wakeIn);
                }
            }

            return $id;
        }
        $this->wake($wakeIn);

        return (int) $this->pdo->lastInsertId();
    }

    /** Whether the last submit() or cron() found its task already there. */
    public function lastExisted(): bool
    {
        return $this->lastExisted;
    }

    /**
     * Whether the last submit() changed the task that held its unique key
     * (on_conflict 'replace' or 'debounce', the task still waiting).
     */
    public function lastChanged(): bool
    {
        return $this->lastChanged;
    }

    /** The on_conflict mode of a submission, checked. */
    private static function conflictMode(array $options, bool $hasKey): string
    {
        $mode = (string) ($options['on_conflict'] ?? 'reject');
        if (!in_array($mode, self::ON_CONFLICT, true)) {
            throw new InvalidArgumentException(sprintf('unknown on_conflict mode %s (want %s)', json_encode($mode), implode(', ', self::ON_CONFLICT)));
        }
        if ($mode !== 'reject' && !$hasKey) {
            throw new InvalidArgumentException(sprintf('on_conflict %s needs a unique_key', $mode));
        }
        if ($mode !== 'debounce' && (isset($options['debounce']) || isset($options['debounce_max']))) {
            throw new InvalidArgumentException('debounce and debounce_max need on_conflict debounce');
        }

        return $mode;
    }

    private static function duplicate(PDOException $e): bool
    {
        return ($e->errorInfo[1] ?? 0) === 1062;
    }

    /**
     * The id of the task of $taskCode holding $key, if any. The unique index
     * folds the case of task_code: a key held by a task of a code that
     * differs only in case is refused, not taken for this code's (the
     * daemon does the same).
     */
    private function holder(string $taskCode, string $key): ?int
    {
        $stmt = $this->pdo->prepare('SELECT id, task_code FROM task_center WHERE task_code = ? AND unique_key = ?');
        $stmt->execute([$taskCode, $key]);
        $row = $stmt->fetch(PDO::FETCH_NUM);
        if ($row === false) {
            return null;
        }
        if ((string) $row[1] !== $taskCode) {
            throw new InvalidArgumentException(sprintf(
                'unique key %s is held by task %d of code %s, which the task center does not tell apart from %s (case and trailing spaces are folded): use one spelling of the code',
                json_encode($key), (int) $row[0], json_encode($row[1]), json_encode($taskCode),
            ));
        }

        return (int) $row[0];
    }

    /**
     * Gives a waiting task (pending, or failed waiting for its retry) the
     * new payload and due time; a task dispatched or running is never
     * changed. Whether it changed.
     *
     * @param list<int|string> $dueArgs
     */
    private function changeWaiting(int $id, string $mode, int|string $payload, string $due, array $dueArgs, int $debounce, int $maxWait): bool
    {
        if ($mode === 'debounce') {
            $stmt = $this->pdo->prepare('UPDATE task_center SET payload = ?,' . $this->newOccurrence('NULL') . '
                plan_next_run_at = GREATEST(plan_next_run_at, LEAST(NOW(3) + INTERVAL ? SECOND, created_at + INTERVAL ? SECOND))
                WHERE id = ? AND status IN (0, 4)');
            $stmt->execute([$payload, $debounce, $maxWait, $id]);
        } else {
            $stmt = $this->pdo->prepare('UPDATE task_center SET payload = ?,' . $this->newOccurrence('NULL')
                . " plan_next_run_at = $due WHERE id = ? AND status IN (0, 4)");
            $stmt->execute([$payload, ...$dueArgs, $id]);
        }

        return $stmt->rowCount() > 0;
    }

    /**
     * until-done: when the task holding $key has ended (succeeded, dead,
     * cancelled), its key moves to released_key and $insert runs again, in
     * one transaction. The new task's id, or null when it did not insert.
     */
    private function takeOver(string $taskCode, string $key, callable $insert): ?int
    {
        $this->pdo->beginTransaction();
        try {
            $stmt = $this->pdo->prepare('UPDATE task_center SET released_key = unique_key, unique_key = NULL
                WHERE task_code = ? AND task_code = BINARY ? AND unique_key = ? AND status IN (3, 5, 6)');
            $stmt->execute([$taskCode, $taskCode, $key]);
            if ($stmt->rowCount() === 0) {
                $this->pdo->rollBack();

                return null;
            }
            $insert();
            $id = (int) $this->pdo->lastInsertId(); // COMMIT resets it
            $this->pdo->commit();

            return $id;
        } catch (PDOException $e) {
            $this->pdo->rollBack();
            if (self::duplicate($e)) {
                return null; // another submit took it over first
            }
            throw $e;
        }
    }

    /**
     * The columns every submission writes, validated as taskd validates.
     *
     * @return array<string, int|string>
     */
    private function row(string $taskCode, array $payload, array $options): array
    {
        self::name('task code', $taskCode);
        // [] is {}, no payload; a list stays a list, as the CLI keeps it
        // ([1,2,3] became {"0":1,"1":2,"2":3}).
        $json = json_encode($payload === [] ? new \stdClass() : $payload,
            JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_PRESERVE_ZERO_FRACTION);
        if ($json === false) {
            throw new InvalidArgumentException('payload is not JSON-encodable: ' . json_last_error_msg());
        }
        if (strlen($json) > self::MAX_PAYLOAD) {
            throw new InvalidArgumentException(sprintf('payload is %d bytes, more than %d', strlen($json), self::MAX_PAYLOAD));
        }
        $row = [
            'task_code' => $taskCode,
            'payload'   => $json,
            'priority'  => self::int($options, 'priority', 0, self::MAX_PRIORITY, 5),
            'timeout'   => self::int($options, 'timeout', 1, self::MAX_TIMEOUT, 300),
            'max_retry' => self::int($options, 'max_retry', 0, self::MAX_RETRY, 3),
            'status'    => 0,
        ];
        if (isset($options['children'])) {
            $n = 0;
            $row['then_spec'] = self::json(self::children($options['children'], $n));
        }
        $key = (string) ($options['unique_key'] ?? '');
        if ($key !== '') {
            if (preg_match('//u', $key) !== 1) {
                throw new InvalidArgumentException('unique key is not UTF-8');
            }
            if (self::chars($key) > self::MAX_UNIQUE_KEY) {
                throw new InvalidArgumentException(sprintf('unique key is longer than %d characters', self::MAX_UNIQUE_KEY));
            }
            // Keys compare exactly but pad with spaces (utf8mb4_bin): 'k '
            // would be the key of 'k'. Whitespace as Go's unicode.IsSpace.
            if (preg_match('/^[\s\x{85}]|[\s\x{85}]\z/u', $key)) {
                throw new InvalidArgumentException(sprintf('unique key %s starts or ends with whitespace', json_encode($key, JSON_UNESCAPED_UNICODE)));
            }
            $row['unique_key'] = $key;
        }
        $queue = (string) ($options['queue'] ?? '');
        if ($queue !== '') {
            self::name('queue', $queue);
            $row['queue'] = $queue;
        }
        $group = (string) ($options['group'] ?? '');
        if ($group !== '') {
            if (self::chars($group) > self::MAX_GROUP || preg_match('/[\x00-\x1f\x7f]/', $group) || trim($group) !== $group) {
                throw new InvalidArgumentException(sprintf('group %s: want at most %d characters of UTF-8, no control characters, no spaces at either end', json_encode($group, JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE), self::MAX_GROUP));
            }
            $row['group_key'] = $group;
        }
        $this->checkCharset($json . ($row['then_spec'] ?? '') . $key . $group);

        return $row;
    }

    /**
     * A batch: the tasks, and a callback task that taskd creates once, when
     * every one of them has ended (succeeded, dead or cancelled), with
     * $callbackPayload plus a "batch" key holding the counts: {"id",
     * "total", "succeeded", "dead", "cancelled"}. All or nothing, in one
     * transaction. Needs taskd's schema 5 or later.
     *
     * @param list<array<string, mixed>> $tasks each ['code' => ..., 'payload' => [...], and
     *                                          submit()'s priority, timeout, max_retry, queue,
     *                                          delay, children]
     * @param array<string, mixed> $callbackPayload
     * @param array<string, mixed> $callbackOptions priority, timeout, max_retry, queue
     * @return array{batch_id: int, member_ids: list<int>}
     */
    public function batch(array $tasks, string $callbackCode, array $callbackPayload = [], array $callbackOptions = []): array
    {
        if ($tasks === [] || count($tasks) > self::MAX_BATCH) {
            throw new InvalidArgumentException(sprintf('a batch has 1 to %d tasks, not %d', self::MAX_BATCH, count($tasks)));
        }
        if ($callbackPayload !== [] && array_is_list($callbackPayload)) {
            // taskd adds the counts under "batch": a list has no key for
            // them, and was dropped for the counts alone.
            throw new InvalidArgumentException('the callback payload must be an object (an array with keys): the counts go in its "batch" key');
        }
        if (array_key_exists('batch', $callbackPayload)) {
            throw new InvalidArgumentException('the callback payload must not have a "batch" key: the counts go there');
        }
        self::checkOptions($callbackOptions, ['priority', 'timeout', 'max_retry', 'queue']);
        $cb = $this->row($callbackCode, $callbackPayload, $callbackOptions);
        $rows = $this->members($tasks, 'of the batch');
        $this->pdo->beginTransaction();
        try {
            $this->pdo->prepare('INSERT INTO task_batch (total, callback_code, callback_queue, callback_priority,
                callback_timeout, callback_max_retry, callback_payload) VALUES (?, ?, ?, ?, ?, ?, ?)')
                ->execute([count($rows), $cb['task_code'], $cb['queue'] ?? '', $cb['priority'], $cb['timeout'],
                    $cb['max_retry'], $cb['payload']]);
            $batchId = (int) $this->pdo->lastInsertId();
            $ids = $this->insertRows($rows, ['batch_id' => $batchId]);
            $this->pdo->commit();
        } catch (\Throwable $e) {
            $this->pdo->rollBack();
            throw $e;
        }
        $this->wake(0.0);

        return ['batch_id' => $batchId, 'member_ids' => $ids];
    }

    /**
     * Many one-off tasks, due now or after their delay, in one transaction:
     * all or nothing, every task checked before anything is written. They
     * go in INSERTs of hundreds of rows each, so a backlog of 100,000 takes
     * seconds, where submit() commits each task on its own (about 500 a
     * second). Unique keys, groups and due times at a given time need
     * submit().
     *
     * @param list<array<string, mixed>> $tasks each ['code' => ..., 'payload' => [...], and
     *                                          submit()'s priority, timeout, max_retry, queue,
     *                                          delay, children]
     * @return list<int> the tasks' ids, in the order of $tasks
     */
    public function submitMany(array $tasks): array
    {
        if ($tasks === [] || count($tasks) > self::MAX_BATCH) {
            throw new InvalidArgumentException(sprintf('submitMany takes 1 to %d tasks, not %d', self::MAX_BATCH, count($tasks)));
        }
        $rows = $this->members($tasks, 'of the list');
        $this->pdo->beginTransaction();
        try {
            $ids = $this->insertRows($rows);
            $this->pdo->commit();
        } catch (\Throwable $e) {
            $this->pdo->rollBack();
            throw $e;
        }
        $this->wake(0.0);

        return $ids;
    }

    /**
     * The rows of batch() members or submitMany() tasks, each checked.
     *
     * @param list<array<string, mixed>> $tasks
     * @return list<array<string, mixed>>
     */
    private function members(array $tasks, string $of): array
    {
        $rows = [];
        foreach (array_values($tasks) as $i => $t) {
            if (!is_array($t) || !isset($t['code']) || !is_string($t['code'])) {
                throw new InvalidArgumentException(sprintf('task %d %s: want an array with a code', $i + 1, $of));
            }
            self::checkOptions($t, self::MEMBER);
            $opts = array_diff_key($t, ['code' => 1, 'payload' => 1, 'delay' => 1]);
            $row = $this->row($t['code'], (array) ($t['payload'] ?? []), $opts);
            $row['task_type'] = 0;
            $row['delay'] = self::int($t, 'delay', 0, PHP_INT_MAX, 0);
            $rows[] = $row;
        }

        return $rows;
    }

    /**
     * INSERTs rows of members() due after their delay, with the columns of
     * $every too, many to a statement (rows with the same columns, up to
     * INSERT_ROWS and INSERT_BYTES of payloads), and returns their ids in
     * order: the server numbers the rows of one INSERT from its first id
     * by auto_increment_increment.
     *
     * @param list<array<string, mixed>> $rows
     * @param array<string, mixed>       $every
     * @return list<int>
     */
    private function insertRows(array $rows, array $every = []): array
    {
        $step = (int) $this->pdo->query('SELECT @@auto_increment_increment')->fetchColumn();
        $ids = [];
        $n = count($rows);
        for ($i = 0; $i < $n;) {
            $columns = array_keys($rows[$i]);
            $args = [];
            $count = 0;
            $bytes = 0;
            while ($i < $n && $count < self::INSERT_ROWS && array_keys($rows[$i]) === $columns) {
                $size = strlen($rows[$i]['payload']) + strlen($rows[$i]['then_spec'] ?? '');
                if ($count > 0 && $bytes + $size > self::INSERT_BYTES) {
                    break;
                }
                array_push($args, ...array_values($rows[$i]), ...array_values($every));
                $args[] = $rows[$i]['delay'];
                $bytes += $size;
                $count++;
                $i++;
            }
            $names = [...$columns, ...array_keys($every)];
            $tuple = '(' . implode(', ', array_fill(0, count($names), '?')) . ', NOW(3) + INTERVAL ? SECOND)';
            $this->pdo->prepare(sprintf(
                'INSERT INTO task_center (%s, plan_next_run_at) VALUES %s',
                implode(', ', $names),
                implode(', ', array_fill(0, $count, $tuple)),
            ))->execute($args);
            $first = (int) $this->pdo->lastInsertId();
            for ($k = 0; $k < $count; $k++) {
                $ids[] = $first + $k * $step;
            }
        }

        return $ids;
    }

    /**
     * The then_spec of children, validated as taskd validates them.
     *
     * @return list<array<string, mixed>>
     */
    private static function children(mixed $children, int &$n): array
    {
        if (!is_array($children) || !array_is_list($children)) {
            throw new InvalidArgumentException('children must be a list of arrays with a code');
        }
        $out = [];
        foreach ($children as $c) {
            if (++$n > self::MAX_CHILDREN) {
                throw new InvalidArgumentException(sprintf('a task may name at most %d tasks to run after it', self::MAX_CHILDREN));
            }
            if (!is_array($c) || !isset($c['code']) || !is_string($c['code'])) {
                throw new InvalidArgumentException('each child must be an array with a code');
            }
            self::checkOptions($c, self::CHILD);
            self::name('task code', $c['code']);
            $child = [
                'code'      => $c['code'],
                'priority'  => self::int($c, 'priority', 0, self::MAX_PRIORITY, 5),
                'timeout'   => self::int($c, 'timeout', 1, self::MAX_TIMEOUT, 300),
                'max_retry' => self::int($c, 'max_retry', 0, self::MAX_RETRY, 3),
            ];
            if (($c['queue'] ?? '') !== '') {
                self::name('queue', (string) $c['queue']);
                $child['queue'] = (string) $c['queue'];
            }
            if (isset($c['delay'])) {
                $child['delay_ms'] = self::int($c, 'delay', 0, PHP_INT_MAX) * 1000;
            }
            if (isset($c['children'])) {
                $child['then'] = self::children($c['children'], $n);
            }
            $out[] = $child;
        }

        return $out;
    }

    private static function json(mixed $v): string
    {
        $json = json_encode($v, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES);
        if ($json === false) {
            throw new InvalidArgumentException('not JSON-encodable: ' . json_last_error_msg());
        }

        return $json;
    }

    /**
     * The characters of $s, as the task center's columns count them (a
     * group of 30 Chinese characters is 90 bytes); PHP_INT_MAX when $s is
     * not UTF-8, which the columns refuse.
     */
    private static function chars(string $s): int
    {
        $n = preg_match_all('/./su', $s);

        return $n === false ? PHP_INT_MAX : $n;
    }

    /**
     * Refuses text beyond ASCII on a connection that does not talk utf8mb4:
     * with charset=latin1 in the PDO DSN, MySQL stores Chinese garbled
     * without an error; with charset=utf8 it refuses every emoji. One
     * query per producer, and only once such text comes.
     */
    private function checkCharset(string $text): void
    {
        if (!preg_match('/[\x80-\xff]/', $text)) {
            return;
        }
        $this->charset ??= (string) $this->pdo->query('SELECT @@character_set_client')->fetchColumn();
        if ($this->charset !== 'utf8mb4') {
            throw new \LogicException(sprintf('the PDO connection talks %s: Chinese and other text beyond ASCII would be stored garbled or refused; add charset=utf8mb4 to its DSN', $this->charset));
        }
    }

    /**
     * The assignment that starts a new occurrence, for a write that gives a
     * task a new due time: scheduled_at keeps a retried run's first due
     * time, which a replaced or rescheduled task no longer has. Empty on a
     * schema before migration 14, which has no such column.
     */
    private function newOccurrence(string $value): string
    {
        $this->scheduledAt ??= (int) $this->pdo->query("SELECT COUNT(*) FROM information_schema.COLUMNS
            WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'task_center' AND COLUMN_NAME = 'scheduled_at'")->fetchColumn() > 0;

        return $this->scheduledAt ? " scheduled_at = $value," : '';
    }

    /** Publishes a wakeup: the schedulers look for due tasks in $in seconds. */
    private function wake(float $in): void
    {
        if ($this->redis === null) {
            return;
        }
        // A client's own key prefix (Laravel's laravel_database_) is put
        // before the channel too, where no scheduler listens: off for the
        // publish.
        $own = '';
        if ($this->redis instanceof \Redis) {
            $own = (string) $this->redis->getOption(\Redis::OPT_PREFIX);
        }
        try {
            if ($own !== '') {
                $this->redis->setOption(\Redis::OPT_PREFIX, '');
            }
            $this->redis->publish($this->redisPrefix . 'wake', (string) (int) round($in * 1000));
        } catch (\Throwable $e) {
            // The task is in the task center: the next poll finds it.
            error_log('taskd: wake schedulers failed; the task is picked up at the next poll: ' . $e->getMessage());
        } finally {
            if ($own !== '') {
                $this->redis->setOption(\Redis::OPT_PREFIX, $own);
            }
        }
    }

    private static function name(string $kind, string $s): void
    {
        if ($s === '' || strlen($s) > 64 || !preg_match('/^[A-Za-z0-9_.:\-]+$/', $s)) {
            throw new InvalidArgumentException(sprintf('%s %s: want 1-64 of A-Z a-z 0-9 _ . : -', $kind, json_encode($s, JSON_UNESCAPED_UNICODE | JSON_INVALID_UTF8_SUBSTITUTE)));
        }
    }

    private static function int(array $options, string $key, int $min, int $max, ?int $default = null): int
    {
        $v = $options[$key] ?? $default;
        if (!is_int($v)) {
            // "1" from a form or a query string: a string is no number here.
            throw new InvalidArgumentException(sprintf('%s %s is not an integer', $key, json_encode($v)));
        }
        if ($v < $min && $max === PHP_INT_MAX) {
            throw new InvalidArgumentException(sprintf('%s %d is less than %d', $key, $v, $min));
        }
        if ($v < $min || $v > $max) {
            throw new InvalidArgumentException(sprintf('%s %d is out of range %d-%d', $key, $v, $min, $max));
        }

        return $v;
    }

    private static function checkOptions(array $options, array $known): void
    {
        foreach (array_keys($options) as $k) {
            if (!in_array($k, $known, true)) {
                throw new InvalidArgumentException(sprintf('unknown option %s (known: %s)', json_encode($k), implode(', ', $known)));
            }
        }
    }

    /** @return array{0: list<string>, 1: list<int|string>} */
    private static function split(array $row): array
    {
        return [array_keys($row), array_values($row)];
    }
}
