/**
 * Standalone simulator: `npm run simulator -- --port P --seed S [--campaigns N] [--jobs N]
 * [--rate R --burst B | --window N/SECONDS [--headers none|laravel|github|ietf] [--turn second|exact|ceil]] [--latency MS]
 * [--size tiny|small|mixed|large]`. Prints one JSON line `{"url", "keys"}` first, then serves
 * until SIGINT/SIGTERM (command.ts).
 */
import { simulatorCommand } from './command.js';

simulatorCommand(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    process.stderr.write(`simulator: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(2);
  },
);
