/**
 * Preloaded into a CLI process by the cli-memory benchmark (`node --import` or NODE_OPTIONS):
 * when the process exits, appends its peak RSS (VmHWM) and CPU to the file BENCH_HWM_FILE
 * names, one JSON line per process (tsx runs two Node processes). Plain JavaScript, so that it
 * loads into the packaged CLI without tsx.
 */
import { appendFileSync, readFileSync } from 'node:fs';

const file = process.env.BENCH_HWM_FILE;
if (file) {
  process.on('exit', () => {
    const status = readFileSync('/proc/self/status', 'utf8');
    const { user, system } = process.cpuUsage();
    appendFileSync(
      file,
      `${JSON.stringify({
        pid: process.pid,
        argv: process.argv.slice(1),
        peak_rss_mb: Number(/^VmHWM:\s+(\d+) kB/m.exec(status)?.[1]) / 1024,
        cpu_s: (user + system) / 1e6,
      })}\n`,
    );
  });
}
