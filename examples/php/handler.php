<?php
// An exec handler: taskd runs `php handler.php` with the task's payload
// (JSON) on stdin and TASK_ID, TASK_CODE, TASK_ATTEMPT, TASK_UNIQUE_KEY and
// TASK_QUEUE in the environment. What it prints is kept as the task's
// result; exit 0 is success, anything else a failed attempt (retried with
// backoff while retries are left), with the last line of stderr as the error.
//
//   handlers:
//     php_report: { exec: ["php", "/opt/app/examples/php/handler.php"] }
declare(strict_types=1);

$payload = json_decode(stream_get_contents(STDIN), true);
if (!is_array($payload)) {
    fwrite(STDERR, "payload is not a JSON object\n");
    exit(2);
}
$id      = (int) getenv('TASK_ID');
$attempt = (int) getenv('TASK_ATTEMPT');
$code    = (string) getenv('TASK_CODE');
// At-least-once: the same task may run again after a crash. A side effect
// keyed by this (the unique key, else the task id) can be made idempotent.
$key = getenv('TASK_UNIQUE_KEY') ?: "task-$id";

if (!empty($payload['fail'])) {
    fwrite(STDERR, "refusing task $id: {$payload['fail']}\n");
    exit(1);
}
printf("handled %s task %d (attempt %d, key %s): %s\n", $code, $id, $attempt, $key,
    json_encode($payload, JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES));
