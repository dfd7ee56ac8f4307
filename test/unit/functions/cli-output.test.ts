/**
 * What the CLI prints: tables aligned by the width text takes on a terminal, log lines a person
 * reads, and progress that moves per report, with an ETA, on a timer when stderr is no terminal.
 */
import { describe, expect, it } from 'vitest';
import { padEnd, truncate } from '../../../functions/cli/columns.js';
import { consoleLog, formatLogLine, formatRequestEvent } from '../../../functions/cli/deps.js';
import {
  formatDuration,
  formatSummary,
  formatTable,
  PLAIN_INTERVAL_MS,
  Progress,
  systemProgressClock,
} from '../../../functions/cli/progress.js';
import { formatResult } from '../../../functions/cli/sql.js';
import type { DriftEntry } from '../../../shared/export/schema-drift.js';
import { emptyCounts, type Manifest } from '../../../shared/export/state/manifest.js';
import { Captured, ManualClock } from '../../helpers/cli.js';

const FAMILY = '👨‍👩‍👧‍👦'; // a ZWJ sequence: 7 code points, 2 columns
const FLAG = '🇯🇵'; // two regional indicators, 2 columns
const COMBINED = 'Zoe\u0308'; // e + combining diaeresis: 3 columns

describe('tables aligned by display width', () => {
  it('pads CJK, emoji (ZWJ sequences, flags) and combining marks to the same column', () => {
    const table = formatTable([
      ['東京', 'a'],
      [FAMILY, 'b'],
      [`${FLAG} jp`, 'c'],
      [COMBINED, 'd'],
      ['plain', 'e'],
    ]);
    // The widest label, 'plain', takes 5 columns; each label is padded to 5 columns by hand here.
    expect(table.split('\n')).toEqual([
      '  東京   a', // 4 columns + 1
      `  ${FAMILY}     b`, // 2 + 3
      `  ${FLAG} jp  c`, // 5 + 0
      `  ${COMBINED}    d`, // 3 + 2
      '  plain  e',
    ]);
  });

  it('lines up query results with wide and zero-width text', () => {
    const text = formatResult({
      columns: ['city', 'n'],
      rows: [
        ['東京都', 1],
        [FAMILY, 22],
        [COMBINED, null],
      ],
    });
    expect(text.split('\n')).toEqual([
      'city   │ n   ',
      '───────┼─────',
      '東京都 │ 1   ',
      `${FAMILY}     │ 22  `,
      `${COMBINED}    │ NULL`,
    ]);
  });

  it('cuts a long value at 40 columns between graphemes, never inside a ZWJ sequence or a flag', () => {
    const { rows } = { rows: [[FAMILY.repeat(30)], [FLAG.repeat(30)], ['字'.repeat(30)]] };
    const lines = formatResult({ columns: ['v'], rows })
      .split('\n')
      .slice(2);
    // 19 two-column graphemes (38 columns) and the ellipsis: 39 columns, the column's width.
    expect(lines).toEqual([`${FAMILY.repeat(19)}…`, `${FLAG.repeat(19)}…`, `${'字'.repeat(19)}…`]);
  });

  it('keeps a value with a line break on one row', () => {
    const lines = formatResult({ columns: ['comment'], rows: [['two\nlines'], ['tab\there']] }).split('\n');
    expect(lines).toEqual(['comment  ', '─────────', 'two lines', 'tab here ']);
  });

  it('truncate and padEnd count columns, not code units', () => {
    expect(truncate('東京都庁', 5)).toBe('東京…');
    expect(truncate('abc', 3)).toBe('abc');
    expect(padEnd('東', 4)).toBe('東  ');
    expect(padEnd('e\u0301', 2)).toBe('e\u0301 ');
  });
});

describe('log lines', () => {
  it('are one human line: level, message, fields as key=value', () => {
    expect(
      formatLogLine('warn', 'could not list the jobs of a campaign', {
        campaign_id: 12,
        error: 'GET /x failed: HTTP 503',
        skipped: undefined,
      }),
    ).toBe('warn: could not list the jobs of a campaign (campaign_id=12, error="GET /x failed: HTTP 503")\n');
    expect(formatLogLine('warn', 'no fields')).toBe('warn: no fields\n');
    expect(formatLogLine('info', 'n', { ids: [1, 2], ok: true })).toBe('info: n (ids=[1,2], ok=true)\n');
  });

  it('show warnings always, info and debug only with --verbose', () => {
    for (const [verbosity, shown] of [
      ['quiet', ['warn: w']],
      ['normal', ['warn: w']],
      ['verbose', ['debug: d', 'info: i', 'warn: w']],
    ] as const) {
      const sink = new Captured();
      const log = consoleLog(verbosity, sink);
      log.debug('d');
      log.info('i');
      log.warn('w');
      expect(sink.lines(), verbosity).toEqual(shown);
    }
  });

  it('drop the error that ended a failed run (the command prints it once) and show errors of a finished one', () => {
    const failed = new Captured();
    const failing = consoleLog('verbose', failed);
    failing.error('run stopped', { error_code: 'API_KEY_EXPIRED' });
    expect(failed.text).toBe('');
    failing.settle(true);
    expect(failed.text).toBe('');

    const finished = new Captured();
    const finishing = consoleLog('normal', finished);
    finishing.error('could not close an interrupted run', { run_id: 'r1' });
    finishing.settle(false);
    finishing.error('later');
    expect(finished.lines()).toEqual([
      'error: could not close an interrupted run (run_id=r1)',
      'error: later',
    ]);
  });

  it('clear the progress bar on a terminal before they are written', () => {
    const tty = new Captured(true);
    consoleLog('normal', tty).warn('w', { campaign_id: 3 });
    expect(tty.text).toBe('\r\x1b[Kwarn: w (campaign_id=3)\n');
  });

  it('describe a request for --verbose', () => {
    const path = '/integration/v1/client/campaigns?page=1&per_page=100';
    expect(formatRequestEvent({ method: 'GET', path, status: 200, attempt: 1, durationMs: 35 })).toBe(
      `GET ${path} -> 200 in 35 ms`,
    );
    expect(
      formatRequestEvent({
        method: 'GET',
        path,
        status: 503,
        attempt: 2,
        durationMs: 4,
        retryInMs: 1000,
        detail: 'HTTP 503',
      }),
    ).toBe(`GET ${path} -> 503 in 4 ms (attempt 2; retry in 1000 ms: HTTP 503)`);
    expect(
      formatRequestEvent({
        method: 'GET',
        path,
        status: 'error',
        attempt: 1,
        durationMs: 30000,
        detail: 'timeout',
      }),
    ).toBe(`GET ${path} -> error in 30000 ms (timeout)`);
  });
});

describe('Progress', () => {
  const started = (progress: Progress, toFetch: number) => {
    progress.onEvent({ type: 'started', runId: '20261122T000000Z-abcdef', campaigns: 1 });
    progress.onEvent({ type: 'planned', campaignId: 7, jobs: toFetch, toFetch });
  };
  const report = (
    progress: Progress,
    outcome: 'exported' | 'pending' | 'failed' = 'exported',
    again = false,
  ) => progress.onEvent({ type: 'report', outcome, again });

  it('prints a plain line every few seconds when stderr is no terminal, even when no event comes', () => {
    const clock = new ManualClock();
    const err = new Captured(false);
    const progress = new Progress(err, clock);
    started(progress, 100);
    expect(err.text).toBe('');

    clock.advance(PLAIN_INTERVAL_MS - 1);
    expect(err.lines()).toHaveLength(0);
    clock.advance(1);
    expect(err.lines()).toHaveLength(1);
    clock.advance(2 * PLAIN_INTERVAL_MS); // a slow API: nothing happens, the lines keep coming
    expect(err.lines()).toHaveLength(3);
    expect(err.lines()[2]).toMatch(/^campaigns 1\/1 {2}reports 0\/100 \(0%\) {2}exported 0 {2}elapsed 15s$/);
  });

  it('moves per report, not per unit, and shows an ETA from the rate so far (5 req/s)', () => {
    const clock = new ManualClock();
    const err = new Captured(false);
    const progress = new Progress(err, clock);
    started(progress, 100);
    for (let i = 0; i < 50; i++) {
      clock.advance(200);
      report(progress);
    }
    // The line at 10 s (the timer fires before the report due at the same instant): 49 reports
    // in the 9.8 s since the first one, 5.0/s, 51 left: 10 s to go.
    expect(err.lines()).toHaveLength(2);
    expect(err.lines()[1]).toBe(
      'campaigns 1/1  reports 49/100 (49%)  exported 49  5.0/s  ETA 10s  elapsed 10s',
    );
    expect(err.lines()[0]).toContain('reports 24/100 (24%)'); // the 5 s line, mid-unit
  });

  it('shows no ETA before there is a rate to go by', () => {
    const clock = new ManualClock();
    const err = new Captured(false);
    const progress = new Progress(err, clock);
    started(progress, 100);
    report(progress);
    clock.advance(PLAIN_INTERVAL_MS);
    expect(err.lines()[0]).not.toContain('ETA');
    expect(err.lines()[0]).toContain('reports 1/100 (1%)');
  });

  it('counts a later round’s answers against the reports left to retry, not as new reports', () => {
    const clock = new ManualClock();
    const err = new Captured(false);
    const progress = new Progress(err, clock);
    started(progress, 3);
    report(progress, 'exported');
    report(progress, 'pending');
    report(progress, 'pending');
    expect(progress.line()).toContain('reports 3/3 (100%)  exported 1  to retry 2');
    report(progress, 'exported', true);
    report(progress, 'failed', true);
    expect(progress.line()).toContain('reports 3/3 (100%)  exported 2  failed 1');
    expect(progress.line()).not.toContain('to retry');
  });

  it('stops its timer at finish and prints the last line once', () => {
    const clock = new ManualClock();
    const err = new Captured(false);
    const progress = new Progress(err, clock);
    started(progress, 10);
    expect(clock.running()).toBe(1);
    progress.finish('succeeded');
    expect(clock.running()).toBe(0);
    expect(err.lines()).toHaveLength(1);
    clock.advance(10 * PLAIN_INTERVAL_MS);
    progress.finish('succeeded');
    expect(err.lines()).toHaveLength(1);
  });

  it('adds nothing for a failed run, and clears a bar it drew', () => {
    const plainClock = new ManualClock();
    const plain = new Captured(false);
    const p1 = new Progress(plain, plainClock);
    started(p1, 10);
    p1.finish('failed');
    expect(plain.text).toBe('');
    expect(plainClock.running()).toBe(0);

    const clock = new ManualClock();
    const tty = new Captured(true);
    const p2 = new Progress(tty, clock);
    started(p2, 10);
    tty.text = '';
    p2.finish('failed');
    expect(tty.text).toBe('\r\x1b[K');
  });

  it('draws a bar on a terminal that fills per report', () => {
    const clock = new ManualClock();
    // Wide enough for the whole line (progress-width.test.ts has the narrower ones).
    const tty = Object.assign(new Captured(true), { columns: 120 });
    const progress = new Progress(tty, clock);
    started(progress, 100);
    for (let i = 0; i < 25; i++) {
      clock.advance(200);
      report(progress);
    }
    // Redrawn as reports come, not only on the timer's second: 25 reports over 5 s.
    expect(tty.text.split('\r').length - 1).toBeGreaterThanOrEqual(25);
    clock.advance(1000); // a frame held back by the redraw throttle comes with the next tick
    const last = tty.text.split('\r').at(-1)!;
    expect(last).toMatch(/^\[#{7}\.{21}\] campaigns 1\/1 {2}reports 25\/100 \(25%\)/);
    progress.finish('succeeded');
    expect(tty.text.endsWith('\n')).toBe(true);
  });

  it('keeps no process alive with its real timer, and stops it', async () => {
    const timeouts = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timeouts();
    let ticks = 0;
    const stop = systemProgressClock.every(5, () => ticks++);
    expect(timeouts()).toBe(before); // unref'd: not among the handles that hold the process
    await new Promise((resolve) => setTimeout(resolve, 40));
    expect(ticks).toBeGreaterThan(0);
    stop();
    const stopped = ticks;
    await new Promise((resolve) => setTimeout(resolve, 30));
    expect(ticks).toBe(stopped);
  });

  it('formats durations', () => {
    expect([
      formatDuration(0),
      formatDuration(12_400),
      formatDuration(245_000),
      formatDuration(3_725_000),
    ]).toEqual(['0s', '12s', '4m 05s', '1h 02m']);
  });
});

describe('formatSummary', () => {
  const manifest = (counts: Partial<Manifest['counts']>, extra: Partial<Manifest> = {}): Manifest => ({
    run_id: '20261122T031500Z-a1b2c3',
    dt: '2026-11-22',
    mode: 'incremental',
    status: 'partial',
    started_at: '2026-11-22T03:15:00.000Z',
    finished_at: '2026-11-22T03:15:10.000Z',
    counts: { ...emptyCounts(), ...counts },
    requests: { total: 10, retried: 1, by_status: { '200': 9, '429': 1 } },
    files: [],
    ...extra,
  });
  const rowsOf = (text: string) =>
    new Map(text.split('\n').map((l) => [l.slice(2, 21).trim(), l.slice(21).trim()]));

  it('shows invalid campaign items and duplicates, zero included', () => {
    const rows = rowsOf(
      formatSummary(manifest({ campaigns: 4, campaigns_invalid: 2, duplicates: 3 }), '/o', 'k'),
    );
    expect(rows.get('campaigns invalid')).toBe('2');
    expect(rows.get('duplicates')).toBe('3');
    const none = rowsOf(formatSummary(manifest({}), '/o', 'k'));
    expect(none.get('campaigns invalid')).toBe('0');
    expect(none.get('duplicates')).toBe('0');
  });

  it('names campaigns whose jobs could not be listed', () => {
    const rows = rowsOf(formatSummary(manifest({}, { unlisted_campaigns: [7, 9] }), '/o', 'k'));
    expect(rows.get('campaigns unlisted')).toBe('7, 9');
    expect(rowsOf(formatSummary(manifest({}), '/o', 'k')).has('campaigns unlisted')).toBe(false);
  });

  it('prints one line per drift kind with its top paths, and none for a run that did not drift', () => {
    const schema_drift: DriftEntry[] = [
      { path: 'job.priority', kind: 'new_field', count: 1, reports: 1, first_job_id: 8 },
      {
        path: 'job.job_status',
        kind: 'unlisted_value',
        count: 31,
        reports: 31,
        first_job_id: 7,
        seen: ['9'],
      },
      {
        path: 'sections[].questions[].answer_type',
        kind: 'unlisted_value',
        count: 6,
        reports: 4,
        first_job_id: 9,
        seen: ['slider'],
      },
      ...['a', 'b', 'c'].map((f) => ({
        path: `sections[].${f}`,
        kind: 'type_mismatch' as const,
        count: 1,
        reports: 1,
        first_job_id: 9,
        seen: ['string'],
      })),
      { path: 'sections[].d', kind: 'type_mismatch', count: 2, reports: 2, first_job_id: 9, seen: ['null'] },
    ];
    const text = formatSummary(manifest({}, { schema_contract: 'evolve', schema_drift }), '/o', 'k');
    const lines = text.split('\n');
    const first = lines.findIndex((l) => l.trimStart().startsWith('schema drift'));
    expect(lines.slice(first, first + 3).map((l) => l.slice(21).trim())).toEqual([
      'new_field 1 path: job.priority (1 report)',
      'type_mismatch 4 paths: sections[].d (2 reports), sections[].a (1), sections[].b (1), 1 more',
      'unlisted_value 2 paths: job.job_status (31 reports), sections[].questions[].answer_type (4)',
    ]);
    expect(lines[first + 3]?.trimStart().startsWith('requests')).toBe(true);
    expect(
      formatSummary(manifest({}, { schema_contract: 'evolve', schema_drift: [] }), '/o', 'k'),
    ).not.toContain('schema drift');
    expect(formatSummary(manifest({}), '/o', 'k')).not.toContain('schema drift');
  });
});
