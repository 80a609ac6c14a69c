export * from '../../base/sessionFolder/processes';
export * from './liveRun';
export * from './view';
export * from './oom';
export * from '../../base/launch/terminal';
