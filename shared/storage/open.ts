/**
 * Opens the storage a CLI `--out` value names (`s3://bucket/prefix` or a local folder), and
 * checks before a run that it can be written, so that a wrong `--out` fails before the API is
 * asked anything.
 */
import { stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { S3Client } from '@aws-sdk/client-s3';
import { ConfigError, ExporterError } from '../errors.js';
import { LocalStorage } from './local.js';
import { makeOutFolder } from './local-folder.js';
import { S3Storage } from './s3.js';
import type { Storage } from './storage.js';

export interface OpenStorageOptions {
  /** AWS region of the bucket; default: the SDK's own resolution (AWS_REGION, profile). */
  region?: string;
  /** A custom S3 endpoint (a local S3-compatible server in tests). */
  endpoint?: string;
  forcePathStyle?: boolean;
}

/** `s3://`, in any case: `S3://bucket` names a bucket too, never a folder called `S3:`. */
const S3_SCHEME = /^s3:\/\//i;

/** Whether `out` names S3 (`s3://…`, any case) rather than a folder. */
export const isS3Out = (out: string): boolean => S3_SCHEME.test(out);

/**
 * "s3://bucket/prefix" (scheme in any case) → S3Storage; anything else → LocalStorage of that
 * folder, resolved against the process's working folder (pass an absolute path to choose).
 *
 * @example
 * openStorage('s3://my-lake/exports/acme', { region: 'eu-west-1' }).location // 's3://my-lake/exports/acme'
 * openStorage('./out').location                                              // '/abs/path/out'
 */
export function openStorage(out: string, options: OpenStorageOptions = {}): Storage {
  if (out.trim() === '')
    throw new ConfigError('--out is empty', { hint: 'pass a folder or s3://bucket/prefix' });
  if (!isS3Out(out)) return new LocalStorage(out);

  const path = out.replace(S3_SCHEME, '');
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

/**
 * Proves that `storage` takes writes: writes a small object at `probeKey` and deletes it (a
 * missing folder is created first, one component at a time; a file system of the kernel such
 * as /proc is refused before anything is made). Throws `ExporterError` with one line naming `--out`
 * and the cause (a file where a folder should be, no permission, no credentials, no such
 * bucket, S3 unreachable) and a hint.
 *
 * @param probeKey a key the run's own layout never uses, e.g. under its state folder.
 */
export async function checkWritable(storage: Storage, probeKey: string): Promise<void> {
  if (storage instanceof LocalStorage) {
    // Missing, or not to be looked at: the write below creates it or says why it cannot.
    const found = await stat(storage.location).catch(() => undefined);
    if (found && !found.isDirectory()) {
      throw new ExporterError(`--out ${storage.location} is a file, not a folder`, {
        hint: 'pass a folder (created if missing) or s3://bucket/prefix',
      });
    }
    // Made one folder at a time: a recursive mkdir on /proc never settles (local-folder.ts).
    await makeOutFolder(storage.location, join(storage.location, dirname(probeKey))).catch((error) => {
      throw error instanceof ExporterError ? error : unwritable(storage, error);
    });
  }
  try {
    await storage.put(probeKey, 'a write check of the exporter; deleted at once\n');
    await storage.delete([probeKey]);
  } catch (error) {
    throw unwritable(storage, error);
  }
}

/** Errno codes and SDK error names of a request that got no answer. */
const NETWORK_FAILURES = [
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'ECONNRESET',
  'EHOSTUNREACH',
  'TimeoutError',
];

/** What went wrong, from the first errno code or AWS error name found down the causes. */
function unwritable(storage: Storage, error: unknown): ExporterError {
  const where = `--out ${storage.location}`;
  const found = new Set(causesOf(error).flatMap(labelsOf));
  /** The first of `labels` among those found, if any. */
  const has = (...labels: string[]) => labels.find((label) => found.has(label));
  const fail = (reason: string, hint: string) =>
    new ExporterError(`${where} ${reason}`, { cause: error, hint });

  if (storage instanceof LocalStorage) {
    if (has('ENOTDIR', 'EEXIST'))
      return fail('cannot be a folder: a part of its path is a file', 'pass a folder, or s3://bucket/prefix');
    if (has('EACCES', 'EPERM'))
      return fail('is not writable: permission denied', 'pass a folder you may write to');
    if (has('EROFS')) return fail('is on a read-only file system', 'pass a folder you may write to');
    if (has('ENOSPC')) return fail('is on a full disk', 'free some space or pass another folder');
  } else {
    if (has('CredentialsProviderError'))
      return fail(
        'cannot be reached: no AWS credentials found',
        'set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or run where a role provides them',
      );
    if (has('NoSuchBucket')) return fail('names a bucket that does not exist', 'check the bucket name');
    if (has('PermanentRedirect', 'AuthorizationHeaderMalformed', 'IllegalLocationConstraintException'))
      return fail('is in another region than the one asked', 'pass --s3-region with the bucket region');
    const denied = has(
      'AccessDenied',
      'InvalidAccessKeyId',
      'SignatureDoesNotMatch',
      'ExpiredToken',
      'Forbidden',
    );
    if (denied)
      return fail(
        `refuses the credentials (${denied})`,
        'they need s3:PutObject, s3:GetObject, s3:DeleteObject and s3:ListBucket on the prefix',
      );
    const network = has(...NETWORK_FAILURES);
    if (network)
      return fail(`cannot be reached (${network})`, 'check the network, --s3-endpoint and --s3-region');
  }
  const detail = error instanceof Error ? error.message : String(error);
  return fail(`cannot be written: ${detail}`, 'check --out');
}

/** The error, its causes and, for an AggregateError (a failed connect), its errors. */
function causesOf(error: unknown, depth = 0): unknown[] {
  if (error === undefined || error === null || depth > 8) return [];
  const nested = error instanceof AggregateError ? error.errors.flatMap((e) => causesOf(e, depth + 1)) : [];
  const cause = error instanceof Error ? causesOf(error.cause, depth + 1) : [];
  return [error, ...nested, ...cause];
}

/** An errno code (`ENOTDIR`) and an error name other than the generic ones (`NoSuchBucket`). */
function labelsOf(error: unknown): string[] {
  if (typeof error !== 'object' || error === null) return [];
  const labels: string[] = [];
  const { code, name } = error as { code?: unknown; name?: unknown };
  if (typeof code === 'string') labels.push(code);
  if (typeof name === 'string' && !['Error', 'StorageError', 'AggregateError'].includes(name))
    labels.push(name);
  return labels;
}
