<?php
// Submits one task with TaskProducer:
//
//   php clients/php/examples/submit.php CODE [PAYLOAD_JSON] [OPTIONS_JSON]
//   php clients/php/examples/submit.php close_order '{"order":42}' '{"unique_key":"order-42","delay":30}'
//
// The task center comes from Laravel's variables (DB_HOST, DB_PORT,
// DB_DATABASE, DB_USERNAME, DB_PASSWORD); with phpredis, REDIS_HOST and
// REDIS_PORT (or TASKD_REDIS_ADDR) and TASKD_REDIS_PREFIX wake the
// schedulers at once.
declare(strict_types=1);

require __DIR__ . '/../src/autoload.php';

use Taskd\TaskProducer;

[, $code, $payload, $options] = $argv + [null, null, '{}', '{}'];
if ($code === null) {
    fwrite(STDERR, "usage: php submit.php CODE [PAYLOAD_JSON] [OPTIONS_JSON]\n");
    exit(2);
}
$payload = json_decode($payload, true);
$options = json_decode($options, true);
if (!is_array($payload) || !is_array($options)) {
    fwrite(STDERR, "submit.php: PAYLOAD_JSON and OPTIONS_JSON must be JSON objects\n");
    exit(2);
}

$pdo = new PDO(sprintf('mysql:host=%s;port=%s;dbname=%s;charset=utf8mb4',
    getenv('DB_HOST') ?: '127.0.0.1', getenv('DB_PORT') ?: '3306', getenv('DB_DATABASE') ?: 'taskd'),
    getenv('DB_USERNAME') ?: 'root', getenv('DB_PASSWORD') ?: '');
$redis = null;
if (extension_loaded('redis')) {
    [$host, $port] = explode(':', getenv('TASKD_REDIS_ADDR') ?: '127.0.0.1:6379') + [1 => '6379'];
    $redis = new Redis();
    try {
        $redis->connect(getenv('REDIS_HOST') ?: $host, (int) (getenv('REDIS_PORT') ?: $port), 1.0);
    } catch (RedisException $e) {
        $redis = null; // the schedulers' next poll finds the task
    }
}
if (isset($options['at'])) {
    $options['at'] = new DateTimeImmutable((string) $options['at']);
}

try {
    $producer = new TaskProducer($pdo, $redis, getenv('TASKD_REDIS_PREFIX') ?: 'task:');
    $id = $producer->submit($code, $payload, $options);
} catch (InvalidArgumentException $e) {
    fwrite(STDERR, 'submit.php: ' . $e->getMessage() . "\n");
    exit(2);
}
echo $producer->lastExisted() ? "task $id already there\n" : "submitted task $id\n";
