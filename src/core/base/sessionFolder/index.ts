// The session folder (the contract in native/python/README.md, "Session folder contract"): one per launch,
// holding each workload process's capture-<pid>.gpumem, proc-<pid>.json and control socket. The launchers create
// it (./create.ts); the live run scans it for captures (./processes.ts), the control commands for running
// processes and their sockets (./discover.ts).
export { createSessionFolder, sessionSlug, capturePath, type SessionFolder, type SessionFolderInfo } from './create';
export { scanSessionFolder, folderNames, type ProcessEntry } from './processes';
export { listProcesses, liveProcesses, readProcFile, isAlive, listSessionFolders, type ProcInfo } from './discover';
