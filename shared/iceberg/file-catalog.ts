/**
 * The file catalog: for a folder, or S3 without Glue (the CLI and the demo). A table's current
 * metadata is its highest `metadata/vN.metadata.json`; a commit creates `v(N+1)` if absent
 * (a conditional create: of two committers on one base exactly one succeeds), then rewrites
 * `metadata/version-hint.text`, the hint readers such as DuckDB's `iceberg_scan` and
 * icebird start from. The hint is only a hint: the loader probes past it, so a hint left
 * behind by a crash between the two writes is harmless.
 */
import { ExporterError, PreconditionFailedError } from '../errors.js';
import { icebergTablePrefix } from '../layout.js';
import type { Storage } from '../storage/storage.js';
import type { CatalogRef, CatalogTable, CommitResult, IcebergCatalog } from './catalog.js';
import { parseJson, stringifyJson } from './json.js';
import { locationOfKey } from './locations.js';
import type { TableMetadata } from './types.js';

const VERSION_HINT = 'version-hint.text';
const VERSION = /^v(\d+)\.metadata\.json$/;
/** A table's `metadata/` folder, as a key prefix. */
const metadataFolder = (table: string): string => `${icebergTablePrefix(table)}/metadata/`;

export class FileCatalog implements IcebergCatalog {
  readonly kind = 'file' as const;

  constructor(readonly storage: Storage) {}

  async ref(): Promise<CatalogRef> {
    return { kind: 'file' };
  }

  tableLocation(table: string): string {
    return locationOfKey(this.storage, icebergTablePrefix(table));
  }

  #metadataKey(table: string, version: number): string {
    return `${metadataFolder(table)}v${version}.metadata.json`;
  }

  /** The highest version present: from the hint, probing forward; from a listing without one. */
  async #currentVersion(table: string): Promise<number> {
    const hint = await this.storage.get(`${metadataFolder(table)}${VERSION_HINT}`);
    let version = hint ? Number.parseInt(Buffer.from(hint.body).toString('utf8').trim(), 10) : Number.NaN;
    if (!Number.isInteger(version) || version < 0) {
      version = 0;
      for await (const key of this.storage.list(`${metadataFolder(table)}v`)) {
        const m = VERSION.exec(key.slice(key.lastIndexOf('/') + 1));
        if (m) version = Math.max(version, Number(m[1]));
      }
    }
    // The hint may lag behind a commit whose hint write was lost: probe forward.
    while (await this.storage.get(this.#metadataKey(table, version + 1))) version++;
    return version;
  }

  async load(table: string): Promise<CatalogTable> {
    const version = await this.#currentVersion(table);
    if (version === 0) return { name: table, metadataLocation: undefined, metadata: undefined, version: '0' };
    const key = this.#metadataKey(table, version);
    const found = await this.storage.get(key);
    if (!found) {
      throw new ExporterError(
        `Iceberg metadata ${this.storage.location}/${key} disappeared while it was read`,
        {
          retryable: true,
        },
      );
    }
    const metadata = parseJson(Buffer.from(found.body).toString('utf8')) as TableMetadata;
    return {
      name: table,
      metadataLocation: locationOfKey(this.storage, key),
      metadata,
      version: String(version),
    };
  }

  async commit(base: CatalogTable, metadata: TableMetadata): Promise<CommitResult> {
    const next = Number(base.version) + 1;
    const key = this.#metadataKey(base.name, next);
    try {
      // S3Storage recognises its own bytes behind a 412 (a lost answer): such a create succeeds.
      await this.storage.put(key, stringifyJson(metadata, 2), {
        ifNoneMatch: '*',
        contentType: 'application/json',
      });
    } catch (error) {
      if (error instanceof PreconditionFailedError) return { committed: false };
      throw error;
    }
    await this.storage
      .put(`${metadataFolder(base.name)}${VERSION_HINT}`, String(next))
      .catch(() => undefined);
    return { committed: true, metadataLocation: locationOfKey(this.storage, key) };
  }
}
