<?php
// Runs the tests without PHPUnit: php tests/run.php [filter]. With
// PHPUnit installed, `phpunit` in this directory runs the same tests.
// The last line is "N passed, N failed, N skipped"; the exit code is 1
// when any failed.
declare(strict_types=1);

require __DIR__ . '/bootstrap.php';
if (!class_exists(\PHPUnit\Framework\TestCase::class)) {
    require __DIR__ . '/TestCase.php';
}
foreach (glob(__DIR__ . '/*Test.php') as $file) {
    require_once $file;
}
$filter = $argv[1] ?? '';
$passed = $failed = $skipped = 0;
foreach (get_declared_classes() as $class) {
    if (!is_subclass_of($class, \PHPUnit\Framework\TestCase::class) || (new ReflectionClass($class))->isAbstract()) {
        continue;
    }
    foreach (get_class_methods($class) as $method) {
        $name = "$class::$method";
        if (!str_starts_with($method, 'test') || ($filter !== '' && !str_contains($name, $filter))) {
            continue;
        }
        $test = new $class($method);
        try {
            $test->runSetUp();
            $test->$method();
            if ($test->expected !== null) {
                throw new \PHPUnit\Framework\AssertionFailedError("expected {$test->expected}, nothing thrown");
            }
            $passed++;
        } catch (\PHPUnit\Framework\SkippedTestError $e) {
            $skipped++;
            echo "SKIP $name: {$e->getMessage()}\n";
        } catch (\Throwable $e) {
            if ($test->expected !== null && $e instanceof $test->expected
                && ($test->expectedMessage === null || str_contains($e->getMessage(), $test->expectedMessage))) {
                $passed++;
                continue;
            }
            $failed++;
            echo "FAIL $name: ", get_class($e), ': ', $e->getMessage(), "\n  at ", $e->getFile(), ':', $e->getLine(), "\n";
        }
    }
}
echo "$passed passed, $failed failed, $skipped skipped\n";
exit($failed > 0 ? 1 : 0);
