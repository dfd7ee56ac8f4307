/**
 * `npm run aws -- start|status|runs [options]`: the aws command run from the repository
 * (aws-command.ts).
 */
import { describeError } from '../../shared/errors.js';
import { awsCommand } from './aws-command.js';

awsCommand(process.argv.slice(2), process.env).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`error: ${describeError(error)}\n`);
    process.exitCode = 1;
  },
);
