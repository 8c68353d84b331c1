<?php
declare(strict_types=1);

require __DIR__ . '/../src/autoload.php';
require __DIR__ . '/Env.php';
