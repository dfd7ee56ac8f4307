/**
 * The DynamoDB SDK and the container's one client, made on first use (nothing at a cold start's
 * import): the request budget and the fetcher slots use the same table, so they share one
 * client and its connections.
 */
import type { DynamoDBClient } from '@aws-sdk/client-dynamodb';

/** Runs `load` once, on the first call. */
export function lazy<T>(load: () => Promise<T>): () => Promise<T> {
  let loaded: Promise<T> | undefined;
  return () => {
    loaded ??= load();
    return loaded;
  };
}

/** The SDK's module, loaded on the first call. */
export const dynamoSdk = lazy(() => import('@aws-sdk/client-dynamodb'));

/** The container's client, made on the first call. */
export const dynamoClient: () => Promise<DynamoDBClient> = lazy(
  async () => new (await dynamoSdk()).DynamoDBClient({}),
);
