<?php
declare(strict_types=1);

namespace Taskd\Tests;

use InvalidArgumentException;
use PHPUnit\Framework\TestCase;
use Taskd\CronSchedule;

final class CronScheduleTest extends TestCase
{
    /** 2026-03-04 10:20:30 UTC, a Wednesday. */
    private const NOW = 1772619630;

    private static function next(string $expr, string $tz = 'UTC', int $now = self::NOW): string
    {
        $t = CronSchedule::parse($expr, $tz)->next((float) $now);

        return (new \DateTimeImmutable('@' . (int) $t))->setTimezone(new \DateTimeZone($tz))->format('Y-m-d H:i:s D');
    }

    public function testFields(): void
    {
        self::assertSame('2026-03-04 10:21:00 Wed', self::next('* * * * *'));
        self::assertSame('2026-03-04 10:30:00 Wed', self::next('*/15 * * * *'));
        self::assertSame('2026-03-05 03:00:00 Thu', self::next('0 3 * * *'));
        self::assertSame('2026-03-04 10:20:35 Wed', self::next('*/5 * * * * *'));
        self::assertSame('2026-03-06 09:00:00 Fri', self::next('0 9 * * FRI'));
        self::assertSame('2026-03-09 08:30:00 Mon', self::next('30 8 * * mon-fri', 'UTC', self::NOW + 86400 * 3));
        self::assertSame('2026-06-01 00:00:00 Mon', self::next('0 0 1 jun,dec *'));
        self::assertSame('2026-04-01 00:00:00 Wed', self::next('@monthly'));
        self::assertSame('2026-03-04 11:00:00 Wed', self::next('@hourly'));
        self::assertSame('2026-03-04 10:25:30 Wed', self::next('@every 5m'));
        self::assertSame('2026-03-04 10:40:00 Wed', self::next('40-45/10 10 * * *'));
    }

    /** Day of week 7 is Sunday, as in crontabs and the daemon. */
    public function testSundaySeven(): void
    {
        self::assertSame('2026-03-08 00:00:00 Sun', self::next('0 0 * * 7'));
        self::assertSame('2026-03-06 00:00:00 Fri', self::next('0 0 * * 5-7'));
        self::assertSame('2026-03-08 00:00:00 Sun', self::next('0 0 * * 6-7', 'UTC', self::NOW + 86400 * 3));
        self::assertSame('2026-03-08 00:00:00 Sun', self::next('0 0 * * 1-7/2', 'UTC', self::NOW + 86400 * 2));
        self::assertSame('2026-03-09 00:00:00 Mon', self::next('0 0 * * 1/2', 'UTC', self::NOW + 86400 * 3));
        self::assertSame('2026-03-06 00:00:00 Fri', self::next('0 0 * * FRI-SUN'));
        self::assertSame('2026-03-08 00:00:00 Sun', self::next('0 0 * * fri-sun', 'UTC', self::NOW + 86400 * 3));
        self::assertSame(self::next('0 0 * * *'), self::next('0 0 * * MON-SUN'));
        self::assertSame('2026-03-08 00:00:00 Sun', self::next('0 0 * * SUN-SUN'));
        $this->expectException(InvalidArgumentException::class);
        $this->expectExceptionMessage('cron field "8": "8" is not in 0-7');
        CronSchedule::parse('0 0 * * 8', 'UTC');
    }

    /** Both day fields restricted: either matches, as in cron. */
    public function testDayOfMonthOrDayOfWeek(): void
    {
        self::assertSame('2026-03-06 00:00:00 Fri', self::next('0 0 13 * FRI'));
        self::assertSame('2026-03-13 00:00:00 Fri', self::next('0 0 13 * *'));
    }

    public function testTimeZones(): void
    {
        self::assertSame('2026-03-05 03:00:00 Thu', self::next('0 3 * * *', 'Asia/Shanghai'));
        self::assertSame('2026-03-05 03:00:00 Thu', self::next('CRON_TZ=Asia/Shanghai 0 3 * * *', 'Asia/Shanghai'));
        // Across the spring-forward gap of New York (2026-03-08, 2:00 -> 3:00).
        self::assertSame('2026-03-08 03:30:00 Sun', self::next('30 * * * *', 'America/New_York', 1772953200 - 60));
    }

    public function testRejectsBadExpressions(): void
    {
        foreach (['', '* * * *', '61 * * * *', '* * * * MON-XYZ', '*/0 * * * *', '5-1 * * * *', '@every soon', '@sometimes'] as $bad) {
            try {
                CronSchedule::parse($bad, 'UTC');
                self::fail("accepted " . json_encode($bad));
            } catch (InvalidArgumentException $e) {
                self::assertTrue($e->getMessage() !== '');
            }
        }
        $this->expectException(InvalidArgumentException::class);
        CronSchedule::parse('* * * * *', 'Mars/Base');
    }

    /** What taskd would refuse when it schedules the next run is refused at once. */
    public function testOnlyWhatTaskdReads(): void
    {
        foreach ([['0 3 * * *', 'asia/shanghai', 'did you mean "Asia/Shanghai"?'], ['0 3 * * *', '+08:00', 'unknown time zone'],
            ['0 3 * * *', 'PST', 'unknown time zone'], ['@Daily', 'UTC', 'unknown descriptor "@Daily"'],
            ["CRON_TZ=UTC\t0 3 * * *", 'UTC', '']] as [$expr, $tz, $want]) {
            try {
                CronSchedule::parse($expr, $tz);
                self::fail('accepted ' . json_encode([$expr, $tz]));
            } catch (InvalidArgumentException $e) {
                self::assertStringContainsString($want, $e->getMessage());
            }
        }
        self::assertSame('2026-03-05 00:00:00 Thu', self::next('@daily', 'UTC'));
        self::assertSame('2026-03-05 03:00:00 Thu', self::next('0 3 * * *', 'US/Eastern'));
    }

    public function testNeverFires(): void
    {
        $this->expectException(InvalidArgumentException::class);
        CronSchedule::parse('0 0 30 2 *', 'UTC')->next((float) self::NOW);
    }
}
