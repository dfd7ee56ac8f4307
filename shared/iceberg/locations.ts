/**
 * Locations and keys of an Iceberg table's files: the metadata names files by absolute location
 * (a URI), the storage by key under its root.
 */
import { ExporterError } from '../errors.js';
import type { Storage } from '../storage/storage.js';
import type { Long } from './avro.js';
import type { IcebergCatalog } from './catalog.js';

/** The key (relative to the storage root) of an absolute location under it. */
export function keyOfLocation(storage: Storage, location: string): string {
  const root = `${storage.location}/`;
  if (!location.startsWith(root)) {
    throw new ExporterError(`Iceberg file ${location} is outside the output ${storage.location}`);
  }
  return location.slice(root.length);
}

export const locationOfKey = (storage: Storage, key: string): string => `${storage.location}/${key}`;

/** A table's `metadata/` key prefix, from its location. */
export const metadataPrefix = (storage: Storage, catalog: IcebergCatalog, table: string) =>
  `${keyOfLocation(storage, catalog.tableLocation(table))}/metadata/`;

export const sameId = (a: Long | null | undefined, b: Long | null | undefined) =>
  a !== undefined && a !== null && b !== undefined && b !== null && BigInt(a) === BigInt(b);
