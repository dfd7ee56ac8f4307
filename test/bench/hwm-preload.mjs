/**
 * Preloaded into a CLI process by the cli-memory benchmark (`node --import` or NODE_OPTIONS):
 * when the process exits, appends its peak RSS (VmHWM) and CPU to the file BENCH_HWM_FILE
 * names, one JSON line per process (tsx runs two Node processes). Plain JavaScript, so that it
 * loads into the packaged CLI without tsx.
 *
 * With BENCH_SAMPLE_MS set, it also samples the process every that many milliseconds and adds
 * `at_peak`, the make-up of the sample with the highest RSS (V8's heap used and reserved, its new
 * space, external memory, the rest; and from /proc/self/smaps, read when a sample passes the peak
 * so far by 4 MiB, glibc's main heap and the other anonymous mappings), and `timeline`, the
 * highest RSS of each 5 s with its make-up: where in the run the peak is, in a process the
 * benchmark cannot split into phases from inside (the packaged CLI).
 */
import { appendFileSync, readFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';

const MiB = 2 ** 20;
const TIMELINE_MS = 5000;
const round = (n) => Math.round(n * 10) / 10;

/** glibc's main heap (`[heap]`) and the other anonymous mappings (V8's pages, mmapped blocks), MiB resident. */
function anonymousMaps() {
  let heap = 0;
  let anon = 0;
  let current = '';
  for (const line of readFileSync('/proc/self/smaps', 'utf8').split('\n')) {
    if (/^[0-9a-f]+-[0-9a-f]+ /.test(line)) current = line.split(/\s+/)[5] ?? '';
    else if (line.startsWith('Rss:')) {
      const kb = Number(line.split(/\s+/)[1]);
      if (current === '[heap]') heap += kb;
      else if (current === '') anon += kb;
    }
  }
  return { malloc_heap: round(heap / 1024), other_anon: round(anon / 1024) };
}

function sample() {
  const m = process.memoryUsage();
  const space = getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
  return {
    rss: round(m.rss / MiB),
    heap_used: round(m.heapUsed / MiB),
    heap_total: round(m.heapTotal / MiB),
    new_space: round((space?.space_size ?? 0) / MiB),
    external: round(m.external / MiB),
    array_buffers: round(m.arrayBuffers / MiB),
    other: round((m.rss - m.heapTotal - m.external) / MiB),
  };
}

const file = process.env.BENCH_HWM_FILE;
if (file) {
  const sampleMs = Number(process.env.BENCH_SAMPLE_MS ?? 0);
  const started = performance.now();
  let atPeak;
  let mapsAt = 0;
  const timeline = [];
  if (sampleMs > 0) {
    setInterval(() => {
      const s = sample();
      if (!atPeak || s.rss > atPeak.rss) {
        const maps = s.rss > mapsAt + 4 ? anonymousMaps() : atPeak?.maps;
        if (s.rss > mapsAt + 4) mapsAt = s.rss;
        atPeak = { ...s, seconds: Math.round((performance.now() - started) / 1000), maps };
      }
      const slot = Math.floor((performance.now() - started) / TIMELINE_MS);
      const last = timeline.at(-1);
      if (last?.slot !== slot) timeline.push({ slot, ...s });
      else if (s.rss > last.rss) Object.assign(last, s);
    }, sampleMs).unref();
  }
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
        ...(atPeak && { at_peak: atPeak, timeline }),
      })}\n`,
    );
  });
}
