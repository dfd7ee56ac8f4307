/**
 * Opens the storage a CLI `--out` value names: `s3://bucket/prefix` or a local folder.
 */
import { S3Client } from '@aws-sdk/client-s3';
import { ConfigError } from '../errors.js';
import { LocalStorage } from './local.js';
import { S3Storage } from './s3.js';
import type { Storage } from './storage.js';

export interface OpenStorageOptions {
  /** AWS region of the bucket; default: the SDK's own resolution (AWS_REGION, profile). */
  region?: string;
  /** A custom S3 endpoint (a local S3-compatible server in tests). */
  endpoint?: string;
  forcePathStyle?: boolean;
}

const S3_SCHEME = 's3://';

/**
 * "s3://bucket/prefix" → S3Storage; anything else → LocalStorage of that folder.
 *
 * @example
 * openStorage('s3://my-lake/exports/acme', { region: 'eu-west-1' }).location // 's3://my-lake/exports/acme'
 * openStorage('./out').location                                              // '/abs/path/out'
 */
export function openStorage(out: string, options: OpenStorageOptions = {}): Storage {
  if (out.trim() === '')
    throw new ConfigError('--out is empty', { hint: 'pass a folder or s3://bucket/prefix' });
  if (!out.startsWith(S3_SCHEME)) return new LocalStorage(out);

  const path = out.slice(S3_SCHEME.length);
  const slash = path.indexOf('/');
  const bucket = slash === -1 ? path : path.slice(0, slash);
  const prefix = slash === -1 ? '' : path.slice(slash + 1);
  if (bucket === '') {
    throw new ConfigError(`--out ${out} names no bucket`, { hint: 'use s3://bucket or s3://bucket/prefix' });
  }
  // The SDK's default checksums (CRC32 on PutObject, UploadPart, DeleteObjects) are kept: real S3
  // and fauxqs both take them, so requestChecksumCalculation 'WHEN_REQUIRED' is not needed
  // (s3rver was the server that broke on them; see ARCHITECTURE.md).
  const client = new S3Client({
    ...(options.region !== undefined && { region: options.region }),
    ...(options.endpoint !== undefined && { endpoint: options.endpoint }),
    ...(options.forcePathStyle !== undefined && { forcePathStyle: options.forcePathStyle }),
  });
  return new S3Storage({ bucket, prefix, client });
}
