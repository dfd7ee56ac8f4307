/**
 * checkWritable on a folder: --out is proven writable before a run, and each way it is not
 * comes out as one line naming --out and the cause.
 */
import { chmod, mkdir, readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ExporterError } from '../../../shared/errors.js';
import { checkWritable, isS3Out, openStorage } from '../../../shared/storage/open.js';
import { tempDir } from '../../helpers/export.js';

const PROBE = 'state/write-check-test';
const isRoot = process.getuid?.() === 0;

const errorOf = async (out: string): Promise<ExporterError> => {
  try {
    await checkWritable(openStorage(out), PROBE);
  } catch (error) {
    expect(error).toBeInstanceOf(ExporterError);
    return error as ExporterError;
  }
  throw new Error(`${out} passed the check`);
};

/** Every file under a folder, relative. */
const filesUnder = async (dir: string): Promise<string[]> =>
  (await readdir(dir, { recursive: true, withFileTypes: true })).filter((e) => e.isFile()).map((e) => e.name);

const restore: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const undo of restore.splice(0)) await undo();
});

describe('isS3Out', () => {
  it.each(['s3://b/p', 'S3://b/p', 'S3://B', 's3://'])('takes %s as S3, the scheme in any case', (out) => {
    expect(isS3Out(out)).toBe(true);
  });

  it.each(['./s3:', 's3:/b', 'out/s3://x', 'S3:bucket'])('takes %s as a folder', (out) => {
    expect(isS3Out(out)).toBe(false);
  });

  it('opens S3://bucket/prefix as the bucket, not as a folder named S3:', () => {
    expect(openStorage('S3://my-lake/p', { region: 'eu-west-1' }).location).toBe('s3://my-lake/p');
  });
});

describe('checkWritable on a folder', () => {
  it('creates a missing folder and leaves no file behind', async () => {
    const out = join(await tempDir('check'), 'new', 'nested');
    await checkWritable(openStorage(out), PROBE);
    expect(await filesUnder(out)).toEqual([]);
  });

  it('refuses a file, naming --out', async () => {
    const file = join(await tempDir('check'), 'report.csv');
    await writeFile(file, 'a,b\n');
    const error = await errorOf(file);
    expect(error.message).toBe(`--out ${file} is a file, not a folder`);
    expect(error.hint).toBe('pass a folder (created if missing) or s3://bucket/prefix');
  });

  it('refuses a path under a file', async () => {
    const file = join(await tempDir('check'), 'report.csv');
    await writeFile(file, 'a,b\n');
    const error = await errorOf(join(file, 'out'));
    expect(error.message).toBe(`--out ${join(file, 'out')} cannot be a folder: a part of its path is a file`);
  });

  // Root passes permission checks: as root the test takes a plain user's identity (the effective
  // uid, restored after) so that a read-only folder is read-only for it too.
  it(`refuses a read-only folder${isRoot ? ' (as root: checked under the effective uid of nobody)' : ''}`, async () => {
    const parent = await tempDir('check');
    const folder = join(parent, 'read-only');
    await mkdir(folder);
    await chmod(parent, 0o755);
    await chmod(folder, 0o555);
    restore.push(() => chmod(folder, 0o755));
    let error: ExporterError;
    try {
      if (isRoot) process.seteuid!(65534);
      error = await errorOf(folder);
    } finally {
      if (isRoot) process.seteuid!(0);
    }
    expect(error.message).toBe(`--out ${folder} is not writable: permission denied`);
    expect(error.hint).toBe('pass a folder you may write to');
  });
});
