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
//       stdout: output   # $this->info() is the task's output; answers go on descriptor 3
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
        // The console the framework opened on stdout at boot: with the
        // handler's stdout: output it is the task's output and the
        // answers go on descriptor 3 (TASK_POOL_FD). Without it, stdout
        // is the protocol's, and the console must write to stderr.
        if (getenv('TASK_POOL_FD') === false) {
            $this->setOutput(new OutputStyle($this->input, new StreamOutput(STDERR)));
        }

        return Worker::run(function (Task $task) use ($handlers) {
            $this->info("task {$task->id}: {$task->code}"); // logged with the task id, kept as its output
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
