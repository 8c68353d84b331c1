<?php
declare(strict_types=1);

namespace Taskd;

use DateTimeImmutable;
use DateTimeZone;
use InvalidArgumentException;

/**
 * A cron expression with the syntax taskd's daemon accepts: five fields
 * (minute hour day-of-month month day-of-week), or six with seconds first;
 * `*`, `?`, lists, ranges, steps, month and weekday names; @yearly,
 * @monthly, @weekly, @daily, @midnight, @hourly and @every <duration>; a
 * CRON_TZ= prefix. When both day fields are restricted, a day matching
 * either runs (as in cron). TaskProducer::cron() needs it only for the first
 * occurrence; the daemon computes the later ones.
 */
final class CronSchedule
{
    private const DESCRIPTORS = [
        '@yearly' => '0 0 0 1 1 *', '@annually' => '0 0 0 1 1 *', '@monthly' => '0 0 0 1 * *',
        '@weekly' => '0 0 0 * * 0', '@daily' => '0 0 0 * * *', '@midnight' => '0 0 0 * * *', '@hourly' => '0 0 * * * *',
    ];
    private const MONTHS = ['jan' => 1, 'feb' => 2, 'mar' => 3, 'apr' => 4, 'may' => 5, 'jun' => 6,
        'jul' => 7, 'aug' => 8, 'sep' => 9, 'oct' => 10, 'nov' => 11, 'dec' => 12];
    private const DAYS = ['sun' => 0, 'mon' => 1, 'tue' => 2, 'wed' => 3, 'thu' => 4, 'fri' => 5, 'sat' => 6];

    /** @var array<int, array<int, true>> allowed values of each field, seconds first */
    private array $sets = [];
    private bool $domStar = false;
    private bool $dowStar = false;
    private int $every = 0;

    private function __construct(private DateTimeZone $zone)
    {
    }

    /**
     * The zone named $name, which taskd must know by the same name: an IANA
     * name, exactly (PHP also takes asia/shanghai, +08:00 and PST, which
     * taskd does not: such a task ran once, then could not be scheduled).
     */
    private static function zone(string $name): DateTimeZone
    {
        static $known = null;
        $known ??= array_flip(DateTimeZone::listIdentifiers(DateTimeZone::ALL_WITH_BC));
        if (isset($known[$name]) || $name === 'UTC') {
            return new DateTimeZone($name);
        }
        foreach (array_keys($known) as $id) {
            if (strcasecmp($id, $name) === 0) {
                throw new InvalidArgumentException(sprintf('unknown time zone %s (did you mean %s? zone names are case-sensitive)',
                    json_encode($name, JSON_UNESCAPED_SLASHES), json_encode($id, JSON_UNESCAPED_SLASHES)));
            }
        }
        throw new InvalidArgumentException(sprintf('unknown time zone %s: want an IANA name such as Asia/Shanghai or UTC', json_encode($name, JSON_UNESCAPED_SLASHES)));
    }

    public static function parse(string $expr, string $timezone = ''): self
    {
        $expr = trim($expr);
        if ($expr === '') {
            throw new InvalidArgumentException('cron expression is empty');
        }
        // One space after the prefix, as taskd splits it.
        if (preg_match('/^(?:CRON_)?TZ=(\S+) +(.*)$/', $expr, $m)) {
            [$timezone, $expr] = [$m[1], $m[2]];
        }
        $s = new self(self::zone($timezone === '' ? date_default_timezone_get() : $timezone));
        if (str_starts_with($expr, '@every ')) {
            $s->every = self::duration(trim(substr($expr, 7)));

            return $s;
        }
        if (str_starts_with($expr, '@') && !isset(self::DESCRIPTORS[$expr])) {
            // Case and all, as taskd reads them: @Daily here ran once and
            // then could not be scheduled again.
            throw new InvalidArgumentException(sprintf('unknown descriptor %s: there are %s and @every INTERVAL',
                json_encode($expr), implode(', ', array_keys(self::DESCRIPTORS))));
        }
        $expr = self::DESCRIPTORS[$expr] ?? $expr;
        $fields = preg_split('/\s+/', $expr);
        if (count($fields) === 5) {
            array_unshift($fields, '0');
        }
        if (count($fields) !== 6) {
            throw new InvalidArgumentException(sprintf('cron expression %s: want 5 or 6 fields, got %d', json_encode($expr), count($fields)));
        }
        $fields[5] = self::sundaySeven($fields[5]);
        $bounds = [[0, 59, []], [0, 59, []], [0, 23, []], [1, 31, []], [1, 12, self::MONTHS], [0, 6, self::DAYS]];
        foreach ($fields as $i => $field) {
            [$s->sets[$i], $star] = self::field($field, ...$bounds[$i]);
            if ($i === 3) {
                $s->domStar = $star;
            } elseif ($i === 5) {
                $s->dowStar = $star;
            }
        }

        return $s;
    }

    /** The first occurrence strictly after $now (a Unix time), as a Unix time. */
    public function next(float $now): float
    {
        $t = (int) floor($now) + 1;
        if ($this->every > 0) {
            return (float) ((int) floor($now) + $this->every);
        }
        $d = (new DateTimeImmutable('@' . $t))->setTimezone($this->zone);
        $limit = $t + 5 * 366 * 86400;
        while ($d->getTimestamp() <= $limit) {
            [$mon, $dom, $dow, $h, $min, $sec] = array_map('intval', explode(' ', $d->format('n j w G i s')));
            if (!isset($this->sets[4][$mon])) {
                $d = $d->modify('first day of next month')->setTime(0, 0);
            } elseif (!$this->dayMatches($dom, $dow)) {
                $d = $d->setTime(0, 0)->modify('+1 day');
            } elseif (!isset($this->sets[2][$h])) {
                $d = $d->setTimestamp($d->getTimestamp() - $min * 60 - $sec + 3600);
            } elseif (!isset($this->sets[1][$min])) {
                $d = $d->setTimestamp($d->getTimestamp() - $sec + 60);
            } elseif (!isset($this->sets[0][$sec])) {
                $d = $d->setTimestamp($d->getTimestamp() + 1);
            } else {
                return (float) $d->getTimestamp();
            }
        }
        throw new InvalidArgumentException('cron expression never fires');
    }

    private function dayMatches(int $dom, int $dow): bool
    {
        $a = isset($this->sets[3][$dom]);
        $b = isset($this->sets[5][$dow]);

        return ($this->domStar || $this->dowStar) ? $a && $b : $a || $b;
    }

    /**
     * Day of week 7 as crontabs read it, Sunday, as the daemon does:
     * "7" -> "0", "5-7" -> "5,6,0", "1-7/2" -> "1,3,5,0", "FRI-SUN" -> "5,6,0".
     */
    private static function sundaySeven(string $dow): string
    {
        $parts = explode(',', $dow);
        foreach ($parts as $i => $p) {
            [$range, $stepText] = array_pad(explode('/', $p, 2), 2, null);
            [$lo, $hi] = array_pad(explode('-', $range, 2), 2, null);
            // A range that ends on SUN by name ends at 7 (MON-SUN is the
            // whole week), but SUN-SUN is Sunday alone.
            $from = ctype_digit((string) $lo) ? (int) $lo : (self::DAYS[strtolower((string) $lo)] ?? null);
            $toSunday = $hi === '7' || ($hi !== null && strtolower($hi) === 'sun' && $from !== 0);
            if ($p === '7') {
                $parts[$i] = '0';
            } elseif ($toSunday && $from !== null && $from <= 7
                && ($stepText === null || (ctype_digit($stepText) && (int) $stepText >= 1))) {
                $days = [];
                for ($d = $from; $d <= 7; $d += (int) ($stepText ?? 1)) {
                    $days[] = $d % 7;
                }
                $parts[$i] = implode(',', $days);
            }
        }

        return implode(',', $parts);
    }

    /** @return array{0: array<int, true>, 1: bool} the values, and whether the field is a bare star */
    private static function field(string $field, int $min, int $max, array $names): array
    {
        $set = [];
        $star = false;
        foreach (explode(',', $field) as $part) {
            $step = 1;
            if (str_contains($part, '/')) {
                [$part, $stepText] = explode('/', $part, 2);
                if (!ctype_digit($stepText) || (int) $stepText < 1) {
                    throw new InvalidArgumentException(sprintf('cron field %s: bad step', json_encode($field)));
                }
                $step = (int) $stepText;
            }
            if ($part === '*' || $part === '?') {
                [$lo, $hi] = [$min, $max];
                $star = $step === 1;
            } elseif (str_contains($part, '-')) {
                [$a, $b] = explode('-', $part, 2);
                [$lo, $hi] = [self::value($a, $min, $max, $names, $field), self::value($b, $min, $max, $names, $field)];
            } else {
                $lo = self::value($part, $min, $max, $names, $field);
                $hi = $step > 1 ? $max : $lo; // "N/step" means N-max/step
            }
            if ($lo > $hi) {
                throw new InvalidArgumentException(sprintf('cron field %s: range %d-%d is backwards', json_encode($field), $lo, $hi));
            }
            for ($v = $lo; $v <= $hi; $v += $step) {
                $set[$v] = true;
            }
        }

        return [$set, $star];
    }

    private static function value(string $s, int $min, int $max, array $names, string $field): int
    {
        $v = $names[strtolower($s)] ?? (ctype_digit($s) ? (int) $s : null);
        if ($v === null || $v < $min || $v > $max) {
            // The day of week takes 7 too (Sunday: sundaySeven rewrote it).
            $shown = $names === self::DAYS ? 7 : $max;
            throw new InvalidArgumentException(sprintf('cron field %s: %s is not in %d-%d', json_encode($field), json_encode($s), $min, $shown));
        }

        return $v;
    }

    /** Seconds of a Go-style duration: 90s, 5m, 1h30m. */
    private static function duration(string $s): int
    {
        if (!preg_match('/^(?:\d+[hms])+$/', $s)) {
            throw new InvalidArgumentException(sprintf('@every %s: want a duration like 90s, 5m or 1h30m', json_encode($s)));
        }
        preg_match_all('/(\d+)([hms])/', $s, $m, PREG_SET_ORDER);
        $total = 0;
        foreach ($m as [, $n, $unit]) {
            $total += (int) $n * ['h' => 3600, 'm' => 60, 's' => 1][$unit];
        }
        if ($total < 1) {
            throw new InvalidArgumentException('@every needs at least 1s');
        }

        return $total;
    }
}
