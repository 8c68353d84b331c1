<?php
// app/Console/Commands/TaskdWork.php: `php artisan taskd:work`, the pool
// handler of a Laravel application. The framework boots once per process;
// each task is then one call of handle()'s closure.
//
//   # taskd.yaml
//   handlers:
//     resize_image:
//       pool: ["php", "artisan", "taskd:work"]
//       size: 4
//       max_jobs: 500
//       max_memory: 256MB
//       dir: /var/www/app
//       env: ["APP_ENV=production"]
//
// Install the client with Composer (a path repository pointing at
// clients/php, or a copy of it), so that Taskd\ autoloads.
declare(strict_types=1);

namespace App\Console\Commands;

use App\Jobs\Handlers;
use Illuminate\Console\Command;
use Illuminate\Console\OutputStyle;
use Symfony\Component\Console\Output\StreamOutput;
use Taskd\Task;
use Taskd\Worker;

final class TaskdWork extends Command
{
    protected $signature = 'taskd:work';

    protected $description = 'Serve taskd pool tasks over stdin/stdout';

    public function handle(Handlers $handlers): int
    {
        // The console output the framework opened on stdout at boot would
        // write $this->info() into the protocol: stdout is taskd's.
        $this->setOutput(new OutputStyle($this->input, new StreamOutput(STDERR)));

        return Worker::run(function (Task $task) use ($handlers) {
            $this->info("task {$task->id}: {$task->code}"); // stderr: logged with the task id
            // At-least-once: a crash can run a task twice. Key side effects
            // on the task's unique key, or on its id when it has none.
            $key = $task->uniqueKey !== '' ? $task->uniqueKey : "task-{$task->id}";

            $result = match ($task->code) {
                'resize_image' => $handlers->resizeImage($task->payload, $key),
                'send_email'   => $handlers->sendEmail($task->payload, $key),
                default        => throw new \InvalidArgumentException("no handler for {$task->code}"),
            };

            // The process lives on: what a request would reset (the
            // authenticated user, singletons holding per-task data) is
            // reset here, as queue:work does between jobs.
            app('auth')->forgetGuards();

            return $result; // the task's result; an exception fails the attempt
        });
    }
}
