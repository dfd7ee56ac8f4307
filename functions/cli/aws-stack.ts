/**
 * The deployed stack as the `aws` command sees it: its outputs (CloudFormation DescribeStacks,
 * by the stack name of a stage) and its start-run function, invoked synchronously so that the
 * run id comes back.
 */
import { type CloudFormationClient, DescribeStacksCommand } from '@aws-sdk/client-cloudformation';
import { InvokeCommand, type LambdaClient } from '@aws-sdk/client-lambda';
import * as z from 'zod';
import { FullRunEstimateSchema, type StartRunEvent } from '../../shared/aws/payloads.js';
import { ExporterError } from '../../shared/errors.js';
import { RunIdSchema } from '../../shared/export/state/records.js';

/** The stack outputs the command needs (infra/exporter.ts `outputs`). */
export const OUTPUT = {
  startRunFunction: 'StartRunFunctionName',
  dataLocation: 'DataLocation',
  /** The partition projection's first `dt`: a stack deployed before it existed has none. */
  projectionStart: 'ProjectionStartDate',
} as const;

/** The outputs of a deployed stack, by key. */
export async function stackOutputs(
  client: CloudFormationClient,
  stackName: string,
): Promise<Map<string, string>> {
  const described = await client
    .send(new DescribeStacksCommand({ StackName: stackName }))
    .catch((error: unknown) => {
      throw awsError(error, `cannot read the stack ${stackName}`);
    });
  const stack = described.Stacks?.[0];
  if (!stack) throw noStack(stackName);
  return new Map(
    (stack.Outputs ?? []).flatMap((o) =>
      o.OutputKey && o.OutputValue ? [[o.OutputKey, o.OutputValue]] : [],
    ),
  );
}

/** One output, or an error naming it and the stack. */
export function requiredOutput(outputs: ReadonlyMap<string, string>, key: string, stackName: string): string {
  const value = outputs.get(key);
  if (value === undefined)
    throw new ExporterError(`the stack ${stackName} has no output ${key}`, {
      hint: 'deploy this version of the stack (npx cdk deploy), or pass the --stage it was deployed with',
    });
  return value;
}

const noStack = (stackName: string, cause?: unknown) =>
  new ExporterError(`no stack ${stackName} in this account and region`, {
    cause,
    hint: 'pass --stage (or --stack) and --region as deployed, or AWS_PROFILE for its account',
  });

/** Errno codes and SDK error names of a request that got no answer. */
const NETWORK_FAILURE = /ECONNREFUSED|ENOTFOUND|EAI_AGAIN|ETIMEDOUT|ECONNRESET|EHOSTUNREACH|TimeoutError/;

/** An SDK error as one line with what to do: no credentials, no stack, access denied. */
function awsError(error: unknown, what: string): ExporterError {
  const name = error instanceof Error ? error.name : '';
  const message = error instanceof Error ? error.message : String(error);
  if (name === 'CredentialsProviderError')
    return new ExporterError(`${what}: no AWS credentials found`, {
      cause: error,
      hint: 'set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY',
    });
  if (name === 'ValidationError' && /does not exist/.test(message)) {
    const stack = /Stack with id (\S+) does not exist/.exec(message)?.[1] ?? 'named';
    return noStack(stack, error);
  }
  const network = NETWORK_FAILURE.exec(`${(error as { code?: unknown }).code ?? ''} ${name} ${message}`);
  if (network)
    return new ExporterError(`${what}: AWS cannot be reached (${network[0]})`, {
      cause: error,
      hint: 'check the network, --region and any AWS_ENDPOINT_URL set',
    });
  if (/AccessDenied|UnauthorizedOperation|NotAuthorized/.test(name))
    return new ExporterError(`${what}: access denied (${name})`, {
      cause: error,
      hint: 'the credentials need cloudformation:DescribeStacks, lambda:InvokeFunction on start-run and s3 read on the bucket',
    });
  return new ExporterError(`${what}: ${name ? `${name}: ` : ''}${message}`, { cause: error });
}

/** start-run's answers (functions/aws/start-run.ts). */
export const StartAnswerSchema = z.union([
  z.object({
    status: z.literal('started'),
    run_id: RunIdSchema,
    campaigns: z.number().int(),
    /** A full run's size and the stack's pace (none from a stack that predates it, or that could not count). */
    estimate: FullRunEstimateSchema.optional(),
  }),
  /** Started, its campaign listing too long for start-run's time: plan-campaign goes on with it. */
  z.object({ status: z.literal('listing'), run_id: RunIdSchema, next_page: z.number().int() }),
  z.object({ status: z.literal('failed'), run_id: RunIdSchema, error: z.string() }),
  z.object({ status: z.literal('skipped'), reason: z.string() }),
  z.object({ status: z.literal('refused'), reason: z.string() }),
  z.object({ status: z.literal('duplicate'), scheduled_time: z.string(), claimed_at: z.string().optional() }),
  /** `{"estimate": "only"}`: a full run's size and pace, or why it could not be counted; no run started. */
  z.object({
    status: z.literal('estimated'),
    estimate: FullRunEstimateSchema.optional(),
    error: z.string().optional(),
  }),
]);
export type StartAnswer = z.infer<typeof StartAnswerSchema>;

/** What an invocation of start-run came back with. */
export type StartOutcome =
  | { kind: 'answer'; answer: StartAnswer }
  /** The function threw (its error type and message), or answered something else (as JSON). */
  | { kind: 'error'; message: string; payload: unknown };

/**
 * Invokes start-run and waits for its answer (RequestResponse). The client must not retry
 * (`maxAttempts: 1`): an invocation that timed out on the client side may have started a run,
 * and a second would find the output locked by it.
 */
export async function invokeStartRun(
  client: LambdaClient,
  functionName: string,
  event: StartRunEvent,
): Promise<StartOutcome> {
  const answer = await client
    .send(
      new InvokeCommand({
        FunctionName: functionName,
        InvocationType: 'RequestResponse',
        Payload: new TextEncoder().encode(JSON.stringify(event)),
      }),
    )
    .catch((error: unknown) => {
      throw awsError(error, `cannot invoke ${functionName}`);
    });
  const text = answer.Payload ? new TextDecoder().decode(answer.Payload) : '';
  let payload: unknown = text;
  try {
    payload = text === '' ? null : JSON.parse(text);
  } catch {
    // Not JSON (a runtime's plain-text failure): shown as it came.
  }
  if (answer.FunctionError !== undefined) {
    const thrown = z
      .object({ errorType: z.string().optional(), errorMessage: z.string() })
      .safeParse(payload);
    const message = thrown.success
      ? `${thrown.data.errorType ? `${thrown.data.errorType}: ` : ''}${thrown.data.errorMessage}`
      : oneLine(payload);
    return { kind: 'error', message, payload };
  }
  const parsed = StartAnswerSchema.safeParse(payload);
  if (parsed.success) return { kind: 'answer', answer: parsed.data };
  const said = z
    .object({ error: z.string() })
    .or(z.object({ reason: z.string() }))
    .safeParse(payload);
  const message = said.success
    ? 'error' in said.data
      ? said.data.error
      : said.data.reason
    : oneLine(payload);
  return { kind: 'error', message, payload };
}

/** Any value as one line. */
const oneLine = (value: unknown): string =>
  (typeof value === 'string' ? value : JSON.stringify(value)).replace(/\s*\n\s*/g, ' ');
