/**
 * A local DynamoDB for tests and benchmarks: dynalite (in memory, in-process) over real HTTP on
 * 127.0.0.1, and the request budget's table with the construct's key schema.
 *
 * dynalite does not return the item of a failed condition (ReturnValuesOnConditionCheckFailure):
 * the budget then reads it again, one request more than on DynamoDB.
 */
import type { IncomingMessage, Server } from 'node:http';
import { createRequire } from 'node:module';
import type { AddressInfo } from 'node:net';
import { CreateTableCommand, DynamoDBClient } from '@aws-sdk/client-dynamodb';
import { REQUEST_BUDGET_TABLE_KEY } from '../../shared/aws/request-budget-table.js';

// dynalite ships no types: a function that returns an http.Server.
const dynalite = createRequire(import.meta.url)('dynalite') as (options: {
  createTableMs?: number;
}) => Server;

const REGION = 'us-east-1';
// dynalite accepts any credentials.
const CREDENTIALS = { accessKeyId: 'test', secretAccessKey: 'test' };

export interface LocalDynamo {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  region: string;
  credentials: { accessKeyId: string; secretAccessKey: string };
  /** A new client for this server. Destroyed by `close()`. */
  client(): DynamoDBClient;
  /** Creates a table with the request budget's key schema (infra/constructs/request-budget.ts). */
  createBudgetTable(name: string): Promise<void>;
  /** Requests the server received so far. */
  requests(): number;
  /** The same, per operation (`GetItem`, `PutItem`, ...: the X-Amz-Target's action). */
  requestsByOperation(): Record<string, number>;
  close(): Promise<void>;
}

/** Starts dynalite on 127.0.0.1 and a free port. */
export async function startDynalite(): Promise<LocalDynamo> {
  const server = dynalite({ createTableMs: 0 });
  let requests = 0;
  const byOperation: Record<string, number> = {};
  server.on('request', (request: IncomingMessage) => {
    requests += 1;
    const target = String(request.headers['x-amz-target'] ?? 'unknown');
    const operation = target.slice(target.lastIndexOf('.') + 1);
    byOperation[operation] = (byOperation[operation] ?? 0) + 1;
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const clients: DynamoDBClient[] = [];
  const client = () => {
    const made = new DynamoDBClient({ endpoint, region: REGION, credentials: CREDENTIALS });
    clients.push(made);
    return made;
  };
  const admin = client();
  return {
    endpoint,
    region: REGION,
    credentials: CREDENTIALS,
    client,
    async createBudgetTable(name) {
      const { name: key, type } = REQUEST_BUDGET_TABLE_KEY;
      await admin.send(
        new CreateTableCommand({
          TableName: name,
          KeySchema: [{ AttributeName: key, KeyType: 'HASH' }],
          AttributeDefinitions: [{ AttributeName: key, AttributeType: type }],
          BillingMode: 'PAY_PER_REQUEST',
        }),
      );
    },
    requests: () => requests,
    requestsByOperation: () => ({ ...byOperation }),
    async close() {
      for (const c of clients) c.destroy();
      server.closeAllConnections();
      await new Promise<void>((resolve, reject) =>
        server.close((error) => (error ? reject(error) : resolve())),
      );
    },
  };
}
