import { CfnOutput } from 'aws-cdk-lib';
import * as ec2 from 'aws-cdk-lib/aws-ec2';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';

export interface FixedEgressProps {
  /** Retention of the VPC flow logs, in days. */
  readonly flowLogRetentionDays: number;
}

/**
 * A fixed egress IP for API keys restricted by IP (spec 5.3): a VPC with one public and one
 * private subnet, one NAT gateway with an Elastic IP the stack outputs. The API functions run
 * in the private subnet; S3 traffic takes a gateway endpoint (free) instead of the NAT.
 */
export class FixedEgress extends Construct {
  readonly vpc: ec2.Vpc;
  readonly subnets: ec2.SubnetSelection = { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS };
  readonly elasticIp: ec2.CfnEIP;

  constructor(scope: Construct, id: string, props: FixedEgressProps) {
    super(scope, id);
    this.elasticIp = new ec2.CfnEIP(this, 'EgressIp', {
      domain: 'vpc',
      tags: [{ key: 'Name', value: 'campaign-report-exporter egress' }],
    });
    const flowLogGroup = new logs.LogGroup(this, 'FlowLogs', {
      retention: props.flowLogRetentionDays as logs.RetentionDays,
    });
    this.vpc = new ec2.Vpc(this, 'Vpc', {
      maxAzs: 1,
      natGateways: 1,
      natGatewayProvider: ec2.NatProvider.gateway({ eipAllocationIds: [this.elasticIp.attrAllocationId] }),
      subnetConfiguration: [
        { name: 'public', subnetType: ec2.SubnetType.PUBLIC, cidrMask: 24 },
        { name: 'private', subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS, cidrMask: 24 },
      ],
      gatewayEndpoints: { S3: { service: ec2.GatewayVpcEndpointAwsService.S3 } },
      flowLogs: {
        all: {
          destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogGroup),
          trafficType: ec2.FlowLogTrafficType.ALL,
        },
      },
      // Nothing uses the default security group (each function gets its own); restricting it
      // would add a custom-resource Lambda to the stack for no gain.
      restrictDefaultSecurityGroup: false,
    });
    new CfnOutput(this, 'EgressIpAddress', {
      description: 'The fixed public IP the API functions call from: allow it for the API key',
      value: this.elasticIp.attrPublicIp,
    }).overrideLogicalId('EgressIpAddress'); // A plain name: the README points people to it.
  }
}
