<?php
// Times the PHP client's ways of submitting a backlog against a migrated
// task center; the tasks are due in an hour, and deleted after.
//
//   php scripts/php-submit.php many|batch|submit [N] [SRC]
//
// many: submitMany(), batch: batch() with a callback, submit: submit()
// one at a time. SRC is the client's src directory (clients/php/src).
// The database: DB_HOST (127.0.0.1), DB_PORT (3306), DB_DATABASE (taskd),
// DB_USERNAME (root), DB_PASSWORD ('').
declare(strict_types=1);

$mode = $argv[1] ?? '';
if (!in_array($mode, ['many', 'batch', 'submit'], true)) {
    fwrite(STDERR, "usage: php scripts/php-submit.php many|batch|submit [N] [SRC]\n");
    exit(2);
}
$n = (int) ($argv[2] ?? 100000);
require ($argv[3] ?? __DIR__ . '/../clients/php/src') . '/autoload.php';
$env = fn (string $k, string $d) => getenv($k) !== false ? (string) getenv($k) : $d;
$pdo = new PDO(sprintf('mysql:host=%s;port=%s;dbname=%s;charset=utf8mb4', $env('DB_HOST', '127.0.0.1'), $env('DB_PORT', '3306'),
    $env('DB_DATABASE', 'taskd')), $env('DB_USERNAME', 'root'), $env('DB_PASSWORD', ''), [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION]);
$producer = new Taskd\TaskProducer($pdo);
$code = 'php_submit_' . bin2hex(random_bytes(3));
$tasks = [];
for ($i = 0; $i < $n; $i++) {
    $tasks[] = ['code' => $code, 'payload' => ['to' => "user$i@example.com", 'n' => $i], 'delay' => 3600];
}
$start = microtime(true);
try {
    match ($mode) {
        'many' => $producer->submitMany($tasks),
        'batch' => $producer->batch($tasks, $code . '_done'),
        'submit' => array_map(fn ($t) => $producer->submit($t['code'], $t['payload'], ['delay' => 3600]), $tasks),
    };
    $took = microtime(true) - $start;
    printf("%s: %d tasks in %.2f s, %.0f tasks/s, peak memory %.0f MiB\n", $mode, $n, $took, $n / $took, memory_get_peak_usage() / 1048576);
} finally {
    $pdo->prepare('DELETE FROM task_center WHERE task_code = ?')->execute([$code]);
    $pdo->prepare('DELETE FROM task_batch WHERE callback_code = ?')->execute([$code . '_done']);
}
