import * as athena from 'aws-cdk-lib/aws-athena';
import { Construct } from 'constructs';
import { queriesFor } from '../../shared/export/queries.js';
import type { TableFormat } from '../../shared/layout.js';
import { ATHENA_RESULTS_PREFIX, type DataLake } from './data-lake.js';

const MIB = 1024 * 1024;
export const ATHENA_ENGINE_VERSION = 'Athena engine version 3';

export interface ExporterAthenaProps {
  readonly dataLake: DataLake;
  readonly workGroupName: string;
  readonly databaseName: string;
  /** Per-query limit on data scanned, in MiB (Athena's minimum is 10). */
  readonly bytesScannedCutoffMb: number;
  /** Iceberg: the queries read the `*_current` tables (there are no `*_latest` views). */
  readonly tableFormat?: TableFormat;
}

/** The Athena workgroup (engine v3, results in the data lake, enforced settings) and the demo's named queries. */
export class ExporterAthena extends Construct {
  readonly workGroup: athena.CfnWorkGroup;
  readonly namedQueries: readonly athena.CfnNamedQuery[];

  constructor(scope: Construct, id: string, props: ExporterAthenaProps) {
    super(scope, id);
    this.workGroup = new athena.CfnWorkGroup(this, 'WorkGroup', {
      name: props.workGroupName,
      description: 'Queries over the campaign-report-exporter data lake',
      state: 'ENABLED',
      // Lets the stack be deleted although the workgroup holds named queries and history.
      recursiveDeleteOption: true,
      workGroupConfiguration: {
        engineVersion: { selectedEngineVersion: ATHENA_ENGINE_VERSION },
        enforceWorkGroupConfiguration: true,
        publishCloudWatchMetricsEnabled: true,
        bytesScannedCutoffPerQuery: props.bytesScannedCutoffMb * MIB,
        resultConfiguration: {
          outputLocation: `s3://${props.dataLake.bucket.bucketName}/${ATHENA_RESULTS_PREFIX}`,
          encryptionConfiguration: { encryptionOption: 'SSE_S3' },
        },
      },
    });
    this.namedQueries = queriesFor(props.tableFormat ?? 'hive').map((q) => {
      const named = new athena.CfnNamedQuery(this, `Query-${q.name}`, {
        name: q.name,
        description: q.description,
        database: props.databaseName,
        queryString: q.sql,
        workGroup: this.workGroup.ref,
      });
      named.addResourceDependency(this.workGroup);
      return named;
    });
  }
}
