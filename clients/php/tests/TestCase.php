<?php
// The part of PHPUnit's TestCase these tests use, for hosts without
// PHPUnit: tests/run.php loads it only when PHPUnit is not installed.
declare(strict_types=1);

namespace PHPUnit\Framework;

class AssertionFailedError extends \RuntimeException
{
}

class SkippedTestError extends \RuntimeException
{
}

abstract class TestCase
{
    public ?string $expected = null;
    public ?string $expectedMessage = null;

    protected function setUp(): void
    {
    }

    public function runSetUp(): void
    {
        $this->setUp();
    }

    public static function assertTrue(mixed $v, string $msg = ''): void
    {
        self::check($v === true, $msg ?: 'expected true, got ' . var_export($v, true));
    }

    public static function assertFalse(mixed $v, string $msg = ''): void
    {
        self::check($v === false, $msg ?: 'expected false, got ' . var_export($v, true));
    }

    public static function assertNull(mixed $v, string $msg = ''): void
    {
        self::check($v === null, $msg ?: 'expected null, got ' . var_export($v, true));
    }

    public static function assertSame(mixed $want, mixed $got, string $msg = ''): void
    {
        self::check($want === $got, $msg . ' expected ' . var_export($want, true) . ', got ' . var_export($got, true));
    }

    public static function assertNotSame(mixed $want, mixed $got, string $msg = ''): void
    {
        self::check($want !== $got, $msg . ' expected anything but ' . var_export($want, true));
    }

    public static function assertEquals(mixed $want, mixed $got, string $msg = ''): void
    {
        self::check($want == $got, $msg . ' expected ' . var_export($want, true) . ', got ' . var_export($got, true));
    }

    public static function assertEqualsWithDelta(float $want, float $got, float $delta, string $msg = ''): void
    {
        self::check(abs($want - $got) <= $delta, "$msg expected $want ± $delta, got $got");
    }

    public static function assertStringContainsString(string $needle, string $haystack, string $msg = ''): void
    {
        self::check(str_contains($haystack, $needle), $msg . ' ' . var_export($haystack, true) . ' does not contain ' . var_export($needle, true));
    }

    public static function assertCount(int $n, array $a, string $msg = ''): void
    {
        self::check(count($a) === $n, "$msg expected $n elements, got " . count($a));
    }

    public static function assertGreaterThan(mixed $than, mixed $got, string $msg = ''): void
    {
        self::check($got > $than, "$msg expected more than $than, got $got");
    }

    public static function fail(string $msg = ''): never
    {
        throw new AssertionFailedError($msg);
    }

    public static function markTestSkipped(string $msg = ''): never
    {
        throw new SkippedTestError($msg);
    }

    public function expectException(string $class): void
    {
        $this->expected = $class;
    }

    public function expectExceptionMessage(string $msg): void
    {
        $this->expectedMessage = $msg;
    }

    private static function check(bool $ok, string $msg): void
    {
        if (!$ok) {
            throw new AssertionFailedError(trim($msg));
        }
    }
}
