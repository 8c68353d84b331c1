<?php
// Submit one task the seed design's way: an INSERT into task_center.
//
//   php producer.php TASK_CODE [PAYLOAD_JSON [DELAY_SECONDS [MAX_RETRY]]]
//
// The database comes from Laravel's variable names: DB_HOST (127.0.0.1),
// DB_PORT (3306), DB_DATABASE (taskd), DB_USERNAME (root), DB_PASSWORD ("").
// Prints "inserted task ID". With the phpredis extension it also wakes the
// schedulers (TASKD_REDIS_ADDR, TASKD_REDIS_PREFIX); without it they find
// the row within scheduler.probe_interval (100 ms by default).
declare(strict_types=1);

require __DIR__ . '/TaskProducer.php';

use App\Task\TaskProducer;

if ($argc < 2) {
    fwrite(STDERR, "usage: php producer.php TASK_CODE [PAYLOAD_JSON [DELAY_SECONDS [MAX_RETRY]]]\n");
    exit(2);
}
$code     = $argv[1];
$payload  = json_decode($argv[2] ?? '{}', true);
$delay    = (int) ($argv[3] ?? 0);
$maxRetry = (int) ($argv[4] ?? 3);
if (!is_array($payload)) {
    fwrite(STDERR, "producer.php: the payload is not a JSON object\n");
    exit(2);
}

$env = fn (string $name, string $default): string => getenv($name) !== false ? (string) getenv($name) : $default;
$pdo = new PDO(
    sprintf('mysql:host=%s;port=%s;dbname=%s;charset=utf8mb4',
        $env('DB_HOST', '127.0.0.1'), $env('DB_PORT', '3306'), $env('DB_DATABASE', 'taskd')),
    $env('DB_USERNAME', 'root'),
    $env('DB_PASSWORD', ''),
    [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION],
);

$id = (new TaskProducer($pdo))->delay($code, $delay, $payload, maxRetry: $maxRetry);
echo "inserted task $id\n";

if (class_exists('Redis')) {
    [$host, $port] = explode(':', $env('TASKD_REDIS_ADDR', '127.0.0.1:6379')) + [1 => '6379'];
    $redis = new Redis();
    $redis->connect($host, (int) $port, 1.0);
    // The message is the delay in milliseconds: a scheduler wakes then.
    $redis->publish($env('TASKD_REDIS_PREFIX', 'task:') . 'wake', (string) ($delay * 1000));
}
