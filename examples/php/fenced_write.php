<?php
// A crontab job run under `taskd lock` that fences its writes with the
// lock's token, so that a holder frozen past its TTL (SIGSTOP, a suspended
// VM) cannot overwrite what the next holder wrote meanwhile:
//
//   taskd lock stock_sync -- php fenced_write.php SKU QTY
//
// Each fenced row carries the token of the last holder that wrote it; a
// write is applied only while that token is not greater than ours. The
// table (made by the caller):
//
//   CREATE TABLE stock (sku VARCHAR(64) PRIMARY KEY, qty INT NOT NULL,
//                       fence BIGINT UNSIGNED NOT NULL DEFAULT 0)
//
// Exits 0 when written, 1 when a newer holder has written the row (stop:
// this process no longer holds the lock), 2 on bad usage. The database
// comes from DB_HOST, DB_PORT, DB_DATABASE, DB_USERNAME, DB_PASSWORD.
declare(strict_types=1);

$token = getenv('TASKD_LOCK_TOKEN');
if ($argc !== 3 || $token === false || !ctype_digit($token)) {
    fwrite(STDERR, "usage: taskd lock NAME -- php fenced_write.php SKU QTY\n");
    exit(2);
}
[, $sku, $qty] = $argv;

$env = fn (string $name, string $default): string => getenv($name) !== false ? (string) getenv($name) : $default;
$pdo = new PDO(
    sprintf('mysql:host=%s;port=%s;dbname=%s;charset=utf8mb4',
        $env('DB_HOST', '127.0.0.1'), $env('DB_PORT', '3306'), $env('DB_DATABASE', 'taskd')),
    $env('DB_USERNAME', 'root'),
    $env('DB_PASSWORD', ''),
    // Count matched rows, not changed ones: rewriting the same value is
    // still a write this holder was allowed to make.
    [PDO::ATTR_ERRMODE => PDO::ERRMODE_EXCEPTION, PDO::MYSQL_ATTR_FOUND_ROWS => true],
);

// <= and not <: the same holder may write the row more than once.
$write = $pdo->prepare('UPDATE stock SET qty = ?, fence = ? WHERE sku = ? AND fence <= ?');
$write->execute([(int) $qty, $token, $sku, $token]);
if ($write->rowCount() === 0) {
    fwrite(STDERR, "fenced_write.php: $sku was written by a newer holder of the lock (or does not exist); stopping\n");
    exit(1);
}
echo "$sku = $qty (token $token)\n";
