<?php
// PSR-4 autoloading of Taskd\ for applications without Composer:
// require __DIR__ . '/path/to/clients/php/src/autoload.php';
declare(strict_types=1);

spl_autoload_register(static function (string $class): void {
    if (str_starts_with($class, 'Taskd\\')) {
        $file = __DIR__ . '/' . str_replace('\\', '/', substr($class, 6)) . '.php';
        if (is_file($file)) {
            require $file;
        }
    }
});
