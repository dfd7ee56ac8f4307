/** An output keeps its table format: an incremental run in another format is refused, a full run switches it. */
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../../shared/errors.js';
import { exporter, tempDir } from '../../helpers/export.js';
import { type Simulator, startSimulator } from '../../simulator/index.js';

describe('the table format of an output', () => {
  let simulator: Simulator;
  beforeAll(async () => {
    simulator = await startSimulator({ seed: 3, campaigns: 1, jobsPerCampaign: 5, reportSize: 'small' });
  });
  afterAll(() => simulator?.close());

  it('is kept until a full run switches it, and recorded when a run publishes', async () => {
    const out = await tempDir('format');
    const target = exporter(simulator, out);
    const recorded = async () =>
      JSON.parse(await readFile(join(out, 'state/table-format.json'), 'utf8')).table_format;

    expect((await target.run({ tableFormat: 'hive' })).status).toBe('succeeded');
    expect(await recorded()).toBe('hive');
    const refused = target.run({ tableFormat: 'iceberg' });
    await expect(refused).rejects.toThrow(ConfigError);
    await expect(refused).rejects.toThrow(/holds hive tables .* --full --table-format iceberg/);

    const full = await target.run({ tableFormat: 'iceberg', mode: 'full' });
    expect(full.iceberg?.tables.reports).toBeDefined();
    expect(await recorded()).toBe('iceberg');
    expect((await target.run({ tableFormat: 'iceberg' })).status).toBe('succeeded');
    await expect(target.run({ tableFormat: 'hive' })).rejects.toThrow(/holds iceberg tables/);
  });

  it('of an output written before the record existed is Hive', async () => {
    const out = await tempDir('format-old');
    const target = exporter(simulator, out);
    await target.run();
    const { rm } = await import('node:fs/promises');
    await rm(join(out, 'state/table-format.json'));
    await expect(target.run({ tableFormat: 'iceberg' })).rejects.toThrow(/holds hive tables/);
  });
});
