// azure-blob.js - an independent Azure Blob client for the tests and the
// benchmark: Microsoft's own @azure/storage-blob (12.32, installed by
// install-deps.sh into build/tools/azclient), never mlfs's code.
//
//   node azure-blob.js mkcontainer CONTAINER
//   node azure-blob.js put CONTAINER BLOB FILE     uploads FILE as block blob BLOB
//   node azure-blob.js get CONTAINER BLOB          writes BLOB to stdout
//   node azure-blob.js ls CONTAINER [PREFIX]       prints "NAME SIZE" per blob, flat
//   node azure-blob.js rm CONTAINER BLOB           deletes BLOB if it is there
//   node azure-blob.js sas CONTAINER               prints a read/list SAS for the container
//   node azure-blob.js blocks CONTAINER BLOB KIND  prints "ID SIZE" per block of the blob's
//                                                  block list, KIND committed or uncommitted,
//                                                  each id base64-decoded
//
// The account comes from AZ_ENDPOINT (e.g. http://127.0.0.1:PORT/devstoreaccount1),
// AZ_ACCOUNT and AZ_KEY.
'use strict';
const path = require('path');
const top = path.resolve(__dirname, '..');
const { BlobServiceClient, StorageSharedKeyCredential, ContainerSASPermissions,
	generateBlobSASQueryParameters } =
	require(path.join(top, 'build/tools/azclient/node_modules/@azure/storage-blob'));

const cred = new StorageSharedKeyCredential(process.env.AZ_ACCOUNT, process.env.AZ_KEY);
const service = new BlobServiceClient(process.env.AZ_ENDPOINT, cred);

async function main(argv) {
	const [cmd, container, a, b] = argv;
	const c = service.getContainerClient(container);
	switch (cmd) {
	case 'mkcontainer':
		await c.createIfNotExists();
		break;
	case 'put':
		await c.getBlockBlobClient(a).uploadFile(b);
		break;
	case 'get': {
		const buf = await c.getBlobClient(a).downloadToBuffer();
		process.stdout.write(buf);
		break;
	}
	case 'rm':
		await c.getBlobClient(a).deleteIfExists();
		break;
	case 'ls':
		for await (const blob of c.listBlobsFlat({ prefix: a || '' }))
			console.log(`${blob.name} ${blob.properties.contentLength}`);
		break;
	case 'sas': {
		const sas = generateBlobSASQueryParameters({
			containerName: container,
			permissions: ContainerSASPermissions.parse('rl'),
			expiresOn: new Date(Date.now() + 3600 * 1000),
		}, cred);
		console.log(sas.toString());
		break;
	}
	case 'blocks': {
		const list = await c.getBlockBlobClient(a).getBlockList(b);
		const blocks = b === 'committed' ? list.committedBlocks : list.uncommittedBlocks;
		for (const blk of blocks || [])
			console.log(`${Buffer.from(blk.name, 'base64').toString()} ${blk.size}`);
		break;
	}
	default:
		throw new Error(`unknown command ${cmd}`);
	}
}

main(process.argv.slice(2)).catch((e) => {
	console.error(`azure-blob.js: ${e.message}`);
	process.exit(1);
});
