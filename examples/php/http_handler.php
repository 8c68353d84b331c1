<?php
// An http handler, as a plain PHP endpoint (a Laravel route does the same,
// see docs/php.md): taskd POSTs the payload as the JSON body with the
// headers X-Task-Id, X-Task-Code, X-Task-Attempt, X-Task-Retry,
// X-Task-Max-Retry, X-Task-Deadline, X-Task-Unique-Key, X-Task-Queue and
// X-Task-Group. A 2xx status is success and the body is kept as the result;
// a 4xx (but 408, 425, 429) makes the task dead at once, anything else is
// retried.
//
//   php -S 127.0.0.1:8080 http_handler.php
//   handlers:
//     build_report: { http: "http://127.0.0.1:8080/tasks/report" }
declare(strict_types=1);

header('Content-Type: text/plain');
if ($_SERVER['REQUEST_METHOD'] !== 'POST' || parse_url($_SERVER['REQUEST_URI'], PHP_URL_PATH) !== '/tasks/report') {
    http_response_code(404);
    echo "no such task endpoint\n";
    return;
}
$payload = json_decode(file_get_contents('php://input'), true);
if (!is_array($payload)) {
    http_response_code(400);
    echo "payload is not a JSON object\n";
    return;
}
$id      = (int) ($_SERVER['HTTP_X_TASK_ID'] ?? 0);
$attempt = (int) ($_SERVER['HTTP_X_TASK_ATTEMPT'] ?? 0);
if (!empty($payload['fail'])) {
    // A non-2xx status fails the attempt: "http 503: <first line of the body>".
    http_response_code(503);
    echo "report backend unavailable\n";
    return;
}
printf("report for task %d (attempt %d): %s\n", $id, $attempt, json_encode($payload, JSON_UNESCAPED_SLASHES));
