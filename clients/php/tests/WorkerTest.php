<?php
declare(strict_types=1);

namespace Taskd\Tests;

use PHPUnit\Framework\TestCase;

/** Speaks the pool protocol to examples/worker.php, as taskd does. */
final class WorkerTest extends TestCase
{
    /** @var resource */
    private $proc;
    /** @var array<int, resource> */
    private array $pipes = [];
    /** The descriptor the worker answers on: 1, or 3 as a pool with stdout: output gives it. */
    private int $answers = 1;

    private function start(array $env = [], int $answers = 1): void
    {
        $cmd = [PHP_BINARY, __DIR__ . '/../examples/worker.php'];
        $spec = [0 => ['pipe', 'r'], 1 => ['pipe', 'w'], 2 => ['pipe', 'w']];
        if ($answers !== 1) {
            $spec[$answers] = ['pipe', 'w'];
            $env['TASK_POOL_FD'] = (string) $answers;
        }
        $this->answers = $answers;
        $this->proc = proc_open($cmd, $spec, $this->pipes, null, $env + getenv());
        stream_set_blocking($this->pipes[2], false);
        self::assertSame(['ready' => true, 'protocol' => 1], $this->read());
    }

    public function __destruct()
    {
        if (is_resource($this->proc ?? null)) {
            foreach ($this->pipes as $p) {
                fclose($p);
            }
            proc_close($this->proc);
        }
    }

    private function read(): array
    {
        $r = [$this->pipes[$this->answers]];
        $w = $e = null;
        // A worker answering elsewhere fails the test instead of hanging it.
        self::assertSame(1, stream_select($r, $w, $e, 10), "no line on descriptor {$this->answers} within 10 s");
        $line = fgets($this->pipes[$this->answers]);
        self::assertTrue($line !== false, "the worker closed descriptor {$this->answers}");
        $decoded = json_decode($line, true);
        self::assertTrue(is_array($decoded), 'not a protocol line: ' . var_export($line, true));

        return $decoded;
    }

    private function task(int $id, mixed $payload): array
    {
        $line = json_encode(['id' => $id, 'code' => 'send_email', 'attempt' => 2, 'retry' => 1, 'max_retry' => 3, 'group' => 'tenant-9',
            'unique_key' => 'k', 'queue' => 'mail', 'payload' => $payload, 'deadline' => gmdate('Y-m-d\TH:i:s.000\Z', time() + 60),
            'scheduled_at' => '2026-12-05T02:00:00.250Z']);
        fwrite($this->pipes[0], $line . "\n");

        return $this->read();
    }

    private function stderr(): string
    {
        usleep(50_000);

        return (string) stream_get_contents($this->pipes[2]);
    }

    public function testAnswers(): void
    {
        $this->start();
        $a = $this->task(7, ['to' => 'a@example.com']);
        self::assertTrue($a['ok']);
        self::assertSame(7, $a['result']['id']);
        self::assertSame(2, $a['result']['attempt']);
        self::assertSame(['to' => 'a@example.com'], $a['result']['payload']);
        self::assertSame('2026-12-05T02:00:00.250Z', $a['result']['scheduled_at'], 'the occurrence, to the millisecond');
        self::assertFalse($a['result']['last_try'], 'retry 1 of 3');
        self::assertSame('tenant-9', $a['result']['group']);
        $pid = $a['result']['pid'];

        self::assertSame(['ok' => false, 'error' => 'RuntimeException: no mailbox'], $this->task(8, ['fail' => 'no mailbox']));
        self::assertStringContainsString('task 8 attempt 2 failed: RuntimeException: no mailbox', $this->stderr());
        self::assertSame(['ok' => false, 'error' => 'Taskd\\PermanentFailure: no such order', 'permanent' => true],
            $this->task(10, ['refuse' => 'no such order']));
        self::assertSame(['ok' => false, 'error' => 'Taskd\\RetryLater: quota used up', 'retry_after' => 60],
            $this->task(11, ['later' => 'quota used up', 'after_s' => 60]));
        // The process goes on after a failure.
        self::assertSame($pid, $this->task(9, [])['result']['pid']);
    }

    /** echo, print_r and child processes write to stderr, not into the protocol. */
    public function testStdoutNoiseGoesToStderr(): void
    {
        $this->start();
        $a = $this->task(1, ['echo' => 'hello from the handler']);
        self::assertTrue($a['ok']);
        $err = $this->stderr();
        self::assertStringContainsString("hello from the handler\n", $err);
        self::assertStringContainsString('[noise] => 1', $err);
        self::assertTrue($this->task(2, [])['ok']);

        // A warning is on stderr once: the CLI's log to stderr is off
        // where display_errors writes there.
        self::assertTrue($this->task(3, ['warn' => 'disk nearly full'])['ok']);
        self::assertSame(1, substr_count($this->stderr(), 'disk nearly full'));
    }

    /**
     * With TASK_POOL_FD the worker answers there, and stdout, a console
     * opened on it at boot included, is output: taskd keeps it in order
     * with stderr.
     */
    public function testAnswersOnTheDescriptorTaskdNames(): void
    {
        $this->start([], 3);
        stream_set_blocking($this->pipes[1], false);
        $a = $this->task(1, ['console' => 'console line', 'echo' => 'echoed']);
        self::assertTrue($a['ok']);
        self::assertSame(1, $a['result']['id']);
        usleep(50_000);
        $out = (string) stream_get_contents($this->pipes[1]);
        self::assertStringContainsString("console line\n", $out);
        self::assertStringContainsString("echoed\n", $out);
        self::assertTrue($this->task(2, [])['ok'], 'the process goes on');
    }

    /** Without it, a console opened on stdout at boot writes into the protocol: what stdout: output is for. */
    public function testConsoleOpenedAtBootBreaksStdout(): void
    {
        $this->start();
        fwrite($this->pipes[0], json_encode(['id' => 1, 'code' => 'c', 'attempt' => 1, 'payload' => ['console' => 'console line']]) . "\n");
        self::assertSame("console line\n", fgets($this->pipes[1]));
    }

    public function testBadRequestAndEof(): void
    {
        $this->start();
        fwrite($this->pipes[0], "not json\n");
        $a = $this->read();
        self::assertFalse($a['ok']);
        self::assertStringContainsString('bad request line', $a['error']);
        fclose($this->pipes[0]);
        unset($this->pipes[0]);
        self::assertSame(false, fgets($this->pipes[1]), 'EOF on stdin ends the worker');
        foreach ($this->pipes as $p) {
            fclose($p);
        }
        $this->pipes = [];
        self::assertSame(0, proc_close($this->proc));
    }

    public function testBootDelay(): void
    {
        $t = microtime(true);
        $this->start(['WORKER_BOOT_MS' => '200']);
        self::assertTrue(microtime(true) - $t >= 0.2, 'the ready line comes after the boot');
    }
}
