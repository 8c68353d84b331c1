<?php
// A pool handler in plain PHP: taskd starts it once per slot and hands it
// one task after another.
//
//   handlers:
//     send_email: { pool: ["php", "clients/php/examples/worker.php"] }
//
// The payload decides what it does, so the tests and the benchmarks can
// drive it: {"fail": "why"} throws, {"refuse": "why"} throws a
// PermanentFailure (no retry), {"later": "why", "after_s": N} throws a
// RetryLater (the retry waits N s), {"sleep_ms": N} works N ms,
// {"echo": "text"} prints (stdout noise that must not break the protocol),
// {"exit": N} dies mid-task (on attempts up to "exit_until_attempt" when
// given), {"grow_mb": N} keeps N MB more memory, {"console": "text"} writes
// to a stream opened on stdout at boot, as a framework's console does
// (output with the handler's `stdout: output`; without it, the protocol
// breaks).
// WORKER_BOOT_MS sleeps that long before the ready line: an application's
// boot.
declare(strict_types=1);

require __DIR__ . '/../src/autoload.php';

use Taskd\Task;
use Taskd\Worker;

if ($boot = (int) getenv('WORKER_BOOT_MS')) {
    usleep($boot * 1000);
}
$console = fopen('php://stdout', 'wb'); // opened before Worker::run, as a framework's console is
$kept = [];
// WORKER_RUN_LOG names a file that gets "id attempt pid" per task run: the
// benchmarks count runs with it.
$runLog = getenv('WORKER_RUN_LOG') ? fopen((string) getenv('WORKER_RUN_LOG'), 'ab') : null;

exit(Worker::run(static function (Task $task) use (&$kept, $runLog, $console): mixed {
    if ($runLog !== null) {
        fwrite($runLog, "{$task->id} {$task->attempt} " . getmypid() . "\n");
    }
    $p = is_array($task->payload) ? $task->payload : [];
    if (isset($p['echo'])) {
        echo $p['echo'], "\n";
        print_r(['noise' => true]);
    }
    if (isset($p['console'])) {
        fwrite($console, $p['console'] . "\n");
    }
    if (isset($p['warn'])) {
        trigger_error((string) $p['warn'], E_USER_WARNING);
    }
    if (isset($p['sleep_ms'])) {
        usleep((int) $p['sleep_ms'] * 1000);
    }
    if (isset($p['grow_mb'])) {
        $kept[] = str_repeat('x', (int) $p['grow_mb'] << 20);
    }
    if (isset($p['exit']) && $task->attempt <= (int) ($p['exit_until_attempt'] ?? PHP_INT_MAX)) {
        fwrite(STDERR, "exiting mid-task\n");
        exit((int) $p['exit']);
    }
    if (isset($p['refuse'])) {
        throw new Taskd\PermanentFailure((string) $p['refuse']);
    }
    if (isset($p['later'])) {
        throw new Taskd\RetryLater((string) $p['later'], (int) ($p['after_s'] ?? 0));
    }
    if (isset($p['fail'])) {
        throw new RuntimeException((string) $p['fail']);
    }
    if (isset($p['quiet'])) {
        return null;
    }
    fwrite(STDERR, "handled task {$task->id}\n");

    return ['id' => $task->id, 'attempt' => $task->attempt, 'pid' => getmypid(), 'payload' => $task->payload,
        'scheduled_at' => $task->scheduledAt?->format('Y-m-d\\TH:i:s.vp'), 'last_try' => $task->isLastTry(), 'group' => $task->group];
}));
