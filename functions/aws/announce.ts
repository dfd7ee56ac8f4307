/**
 * The `ExportRunFinished` event on EventBridge, for downstream ingestion: the run, its status
 * and counts, the manifest's key, and the files it published (keys with the bucket's prefix),
 * or only the manifest's key when the list would not fit in an event.
 */
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { ExporterError } from '../../shared/errors.js';
import { manifestKey } from '../../shared/export/layout.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import { env } from './runtime.js';

export const EVENT_SOURCE = 'campaign-report-exporter';
export const EVENT_DETAIL_TYPE = 'ExportRunFinished';
/**
 * EventBridge takes entries of up to 256 KB; the file list goes in the event while the detail
 * stays under this, and is otherwise read from the manifest (`files_in_manifest: true`).
 */
export const MAX_DETAIL_BYTES = 200 * 1024;

/** Created on first use: start-run needs it only when it closes an interrupted run. */
let events: EventBridgeClient | undefined;

/** The event's detail: everything an ingestion job needs to pick the run up. */
export function eventDetail(manifest: Manifest): string {
  const base = {
    run_id: manifest.run_id,
    dt: manifest.dt,
    mode: manifest.mode,
    status: manifest.status,
    bucket: env.DATA_BUCKET,
    manifest_key: `${env.DATA_PREFIX}${manifestKey(manifest.dt, manifest.run_id)}`,
    counts: manifest.counts,
  };
  const files = manifest.files.map((f) => ({ ...f, key: `${env.DATA_PREFIX}${f.key}` }));
  const detail = JSON.stringify({ ...base, files });
  return Buffer.byteLength(detail) <= MAX_DETAIL_BYTES
    ? detail
    : JSON.stringify({ ...base, files_in_manifest: true });
}

/** Puts the run's `ExportRunFinished` event; throws (retryable) when EventBridge refuses it. */
export async function announce(manifest: Manifest): Promise<void> {
  events ??= new EventBridgeClient({});
  const answer = await events.send(
    new PutEventsCommand({
      Entries: [
        {
          Source: EVENT_SOURCE,
          DetailType: EVENT_DETAIL_TYPE,
          EventBusName: env.EVENT_BUS_NAME,
          Detail: eventDetail(manifest),
        },
      ],
    }),
  );
  if (answer.FailedEntryCount) {
    throw new ExporterError(`EventBridge refused the ExportRunFinished event of ${manifest.run_id}`, {
      retryable: true,
    });
  }
}
