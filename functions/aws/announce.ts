/**
 * Puts a finished run's `ExportRunFinished` event on EventBridge (its detail:
 * shared/aws/run-finished.ts).
 */
import { EventBridgeClient, PutEventsCommand } from '@aws-sdk/client-eventbridge';
import { EVENT_DETAIL_TYPE, EVENT_SOURCE, runFinishedDetail } from '../../shared/aws/run-finished.js';
import { ExporterError } from '../../shared/errors.js';
import type { Manifest } from '../../shared/export/state/manifest.js';
import type { Env } from './env.js';

/** Created on first use: start-run needs it only when it closes an interrupted run. */
let events: EventBridgeClient | undefined;

/**
 * Puts a run's `ExportRunFinished` event on the deployment's bus (`env`); throws (retryable)
 * when EventBridge refuses it.
 */
export const eventBridgeAnnouncer =
  (env: Pick<Env, 'EVENT_BUS_NAME' | 'STAGE' | 'DATA_BUCKET' | 'DATA_PREFIX'>) =>
  async (manifest: Manifest): Promise<void> => {
    events ??= new EventBridgeClient({});
    const answer = await events.send(
      new PutEventsCommand({
        Entries: [
          {
            Source: EVENT_SOURCE,
            DetailType: EVENT_DETAIL_TYPE,
            EventBusName: env.EVENT_BUS_NAME,
            Detail: runFinishedDetail(manifest, {
              stage: env.STAGE,
              bucket: env.DATA_BUCKET,
              prefix: env.DATA_PREFIX,
            }),
          },
        ],
      }),
    );
    if (answer.FailedEntryCount) {
      throw new ExporterError(`EventBridge refused the ExportRunFinished event of ${manifest.run_id}`, {
        retryable: true,
      });
    }
  };
