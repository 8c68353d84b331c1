<?php
declare(strict_types=1);

namespace Taskd;

use Throwable;

/**
 * The pool protocol's loop (docs/pool-protocol.md): a taskd `pool` handler
 * starts this process once and hands it one task after another.
 *
 *     exit(Taskd\Worker::run(fn (Taskd\Task $task) => resize($task->payload)));
 *
 * The handler's return value is the task's result (JSON-encoded); an
 * exception fails the attempt with its class and message (retried as the
 * task's max_retry allows), and its trace goes to stderr.
 *
 * With the handler's `stdout: output`, taskd names the descriptor to
 * answer on in TASK_POOL_FD (3), and everything printed on stdout is the
 * task's output, a console opened at boot included. Otherwise stdout
 * carries the protocol: before the first task the process's file
 * descriptor 1 is pointed at stderr, so `echo`, `var_dump`, Monolog and
 * child processes land in the attempt's output instead of breaking the
 * protocol (the STDOUT constant is closed by that: write to php://stdout
 * instead), but a stream opened on stdout before run() (a framework's
 * console) still writes into it.
 */
final class Worker
{
    public const PROTOCOL = 1;

    /** @var resource|null the protocol's end of the real stdout */
    private static $protocol = null;
    /** @var resource|null what file descriptor 1 now is (stderr) */
    private static $stdout = null;

    /**
     * Serves tasks until stdin closes, then returns the exit code (0).
     *
     * @param callable(Task): mixed $handle
     */
    public static function run(callable $handle): int
    {
        ini_set('display_errors', 'stderr');
        if ((string) ini_get('error_log') === '') {
            // The CLI logs to stderr too: every warning came twice.
            ini_set('log_errors', '0');
        }
        $in = defined('STDIN') ? STDIN : fopen('php://stdin', 'rb');
        self::openProtocol();
        self::send(['ready' => true, 'protocol' => self::PROTOCOL]);
        while (($line = fgets($in)) !== false) {
            $line = trim($line);
            if ($line === '') {
                continue;
            }
            self::send(self::handle($handle, $line));
        }

        return 0;
    }

    /**
     * Runs one request line.
     *
     * @return array<string, mixed> the answer
     */
    private static function handle(callable $handle, string $line): array
    {
        try {
            $request = json_decode($line, true, 512, JSON_THROW_ON_ERROR | JSON_BIGINT_AS_STRING);
            if (!is_array($request)) {
                throw new \UnexpectedValueException('the request is not a JSON object');
            }
            $task = Task::fromRequest($request);
        } catch (Throwable $e) {
            return ['ok' => false, 'error' => 'taskd worker: bad request line: ' . $e->getMessage()];
        }
        $level = ob_get_level();
        try {
            $result = $handle($task);
            self::flushOutput($level);
            json_encode($result, self::JSON_FLAGS | JSON_THROW_ON_ERROR);

            return ['ok' => true, 'result' => $result];
        } catch (Throwable $e) {
            self::flushOutput($level);
            fwrite(STDERR, sprintf("task %d attempt %d failed: %s\n", $task->id, $task->attempt, $e));

            $answer = ['ok' => false, 'error' => self::describe($e)];
            if ($e instanceof PermanentFailure) {
                $answer['permanent'] = true;
            } elseif ($e instanceof RetryLater && $e->seconds > 0) {
                $answer['retry_after'] = $e->seconds;
            }

            return $answer;
        }
    }

    private const JSON_FLAGS = JSON_UNESCAPED_UNICODE | JSON_UNESCAPED_SLASHES | JSON_PRESERVE_ZERO_FRACTION | JSON_INVALID_UTF8_SUBSTITUTE;

    /** Writes one protocol line to the real stdout. */
    private static function send(array $message): void
    {
        $json = json_encode($message, self::JSON_FLAGS);
        if ($json === false) {
            $json = json_encode(['ok' => false, 'error' => 'the result is not JSON-encodable: ' . json_last_error_msg()]);
        }
        fwrite(self::$protocol, $json . "\n");
        fflush(self::$protocol);
    }

    /**
     * Opens the descriptor taskd named in TASK_POOL_FD for the protocol,
     * or, without it, takes stdout for it.
     */
    private static function openProtocol(): void
    {
        $fd = getenv('TASK_POOL_FD');
        if ($fd === false || $fd === '') {
            self::claimStdout();

            return;
        }
        if (self::$protocol !== null) {
            return;
        }
        if (!ctype_digit($fd) || ($stream = @fopen('php://fd/' . $fd, 'wb')) === false) {
            fwrite(STDERR, "taskd worker: TASK_POOL_FD={$fd} is not a descriptor this process can write\n");
            exit(1);
        }
        self::$protocol = $stream;
    }

    /**
     * Keeps a duplicate of file descriptor 1 for the protocol and points
     * descriptor 1 at stderr: closing STDOUT frees descriptor 1, and the
     * next descriptor opened takes the lowest free number.
     */
    private static function claimStdout(): void
    {
        if (self::$protocol !== null) {
            return;
        }
        self::$protocol = fopen('php://fd/1', 'wb');
        if (defined('STDOUT')) {
            fclose(STDOUT);
        }
        self::$stdout = fopen('php://fd/2', 'wb');
    }

    /** Sends what a handler left in output buffers to stderr. */
    private static function flushOutput(int $level): void
    {
        while (ob_get_level() > $level) {
            $buffered = ob_get_clean();
            if ($buffered !== false && $buffered !== '') {
                fwrite(STDERR, $buffered);
            }
        }
        flush();
    }

    private static function describe(Throwable $e): string
    {
        $msg = $e->getMessage();
        if ($e instanceof \JsonException) {
            $msg = 'the result is not JSON-encodable: ' . $msg;
        }

        return $msg === '' ? get_class($e) : get_class($e) . ': ' . $msg;
    }
}
