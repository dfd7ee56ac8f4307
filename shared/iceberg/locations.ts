/**
 * Locations and keys of an Iceberg table's files: the metadata names files by absolute location
 * (a URI), the storage by key under its root. An S3 output's locations are `s3://bucket/prefix/…`;
 * a folder output's are `file:///abs/folder/…` (the spec asks for a URI). Folder outputs written
 * before that name their files by bare absolute path, and their manifests are carried for ever:
 * both forms are read, and so is `file:/abs/…`, the form Java's Hadoop file system writes.
 */
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ExporterError } from '../errors.js';
import type { Storage } from '../storage/storage.js';
import type { Long } from './avro.js';
import type { IcebergCatalog } from './catalog.js';

/** A folder's storage location is an absolute path; any other (S3) is a URI already. */
const isFolder = (storage: Storage) => storage.location.startsWith('/');

/** The URI of the storage root: its location, or for a folder its `file://` URL. */
export const rootUri = (storage: Storage): string =>
  isFolder(storage) ? pathToFileURL(storage.location).href : storage.location;

/** The key (relative to the storage root) of an absolute location under it. */
export function keyOfLocation(storage: Storage, location: string): string {
  const fail = (cause?: unknown) =>
    new ExporterError(`Iceberg file ${location} is outside the output ${storage.location}`, { cause });
  let path = location;
  if (isFolder(storage) && location.startsWith('file:')) {
    try {
      path = fileURLToPath(location);
    } catch (error) {
      throw fail(error);
    }
  }
  const root = `${storage.location}/`;
  if (!path.startsWith(root)) throw fail();
  return path.slice(root.length);
}

/** The location of a key: under {@link rootUri}, the key's segments as they are (ours need no escaping). */
export const locationOfKey = (storage: Storage, key: string): string => `${rootUri(storage)}/${key}`;

/** A table's `metadata/` key prefix, from its location. */
export const metadataPrefix = (storage: Storage, catalog: IcebergCatalog, table: string) =>
  `${keyOfLocation(storage, catalog.tableLocation(table))}/metadata/`;

export const sameId = (a: Long | null | undefined, b: Long | null | undefined) =>
  a !== undefined && a !== null && b !== undefined && b !== null && BigInt(a) === BigInt(b);
