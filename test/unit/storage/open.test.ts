import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../shared/errors.js';
import { LocalStorage } from '../../../shared/storage/local.js';
import { openStorage } from '../../../shared/storage/open.js';
import { S3Storage } from '../../../shared/storage/s3.js';

describe('openStorage', () => {
  it('opens S3 for s3://bucket/prefix', () => {
    const storage = openStorage('s3://my-lake/exports/acme/', { region: 'eu-west-1' });

    expect(storage).toBeInstanceOf(S3Storage);
    expect(storage.location).toBe('s3://my-lake/exports/acme');
  });

  it('opens the bucket root for s3://bucket', () => {
    expect(openStorage('s3://my-lake', { region: 'eu-west-1' }).location).toBe('s3://my-lake');
  });

  it('opens a local folder, made absolute, for anything else', () => {
    const storage = openStorage('out/demo');

    expect(storage).toBeInstanceOf(LocalStorage);
    expect(storage.location).toBe(resolve('out/demo'));
  });

  it.each(['', '  ', 's3://', 's3:///prefix', 's3://lake/../x'])('rejects --out %j', (out) => {
    expect(() => openStorage(out, { region: 'eu-west-1' })).toThrow(ConfigError);
  });
});
