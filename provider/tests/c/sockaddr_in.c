/*
 * FI_SOCKADDR_IN (plain IPv4/UDP) endpoints through libfabric's C API on the ringfab provider:
 * node a (emu:igb, 192.0.2.1/24) and node b (emu:e1000e, 192.0.2.2/24), as FI_RINGFAB_IPV4
 * configures them (provider/tests/provider.rs sets it). What fi_getinfo offers (the format,
 * addresses from node and service, sizes, what plain UDP refuses), fi_getname, fi_av_insert,
 * fi_av_insertsvc, fi_av_lookup and fi_av_straddr of sockaddr_in, datagrams both ways compared
 * byte for byte, FI_SOURCE and FI_SOURCE_ERR (the sender's sockaddr_in in err_data, inserted,
 * then FI_SOURCE giving its fi_addr), the largest message and one byte more, remote CQ data
 * refused, a send to an address nobody answers ARP for completing in error with
 * FI_EHOSTUNREACH, and the receive pool: datagrams held while no receive is posted and taken
 * in order by receives posted later, fi_cancel, fi_rx_size_left, the receive counter and
 * FI_ETRUNC. Prints "N passed, N failed".
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include "check.h"

#define BUF (64 * 1024)
/* Each node keeps RX receives posted, one per SLOT of the first half of its buffer. */
#define RX 4
#define SLOT (BUF / 2 / RX)
#define A_ADDR "192.0.2.1"
#define B_ADDR "192.0.2.2"
/* The port node a binds, named through fi_getinfo's service with FI_SOURCE. */
#define A_PORT 5001
/* An address on the subnet that no host has: nobody answers ARP for it. */
#define NOBODY "192.0.2.99"

struct node {
	struct fi_info *info;
	struct fid_fabric *fabric;
	struct fid_domain *domain;
	struct fid_cq *cq;
	struct fid_av *av;
	struct fid_mr *mr;
	struct fid_ep *ep;
	struct fid_cntr *rx_cntr;
	unsigned char *buf;
	struct sockaddr_in name;
	/* The contexts of the receives each node keeps posted, one per slot. */
	int rx_ctx[RX];
};

static struct fi_info *hints_for(const char *domain, uint64_t caps)
{
	struct fi_info *hints = fi_allocinfo();

	hints->fabric_attr->prov_name = strdup("ringfab");
	if (domain)
		hints->domain_attr->name = strdup(domain);
	hints->ep_attr->type = FI_EP_DGRAM;
	hints->caps = caps;
	hints->addr_format = FI_SOCKADDR_IN;
	hints->domain_attr->mr_mode = FI_MR_LOCAL;
	return hints;
}

/* fi_getinfo with `hints` (freed), `node`, `service` and `flags`: its return value. */
static int getinfo(struct fi_info *hints, const char *node, const char *service, uint64_t flags,
		   struct fi_info **info)
{
	int ret = fi_getinfo(FI_VERSION(1, 17), node, service, flags, hints, info);
	fi_freeinfo(hints);
	return ret;
}

static int is_sin(const void *addr, size_t len, const char *ip, int port)
{
	const struct sockaddr_in *s = addr;
	struct in_addr want;
	inet_pton(AF_INET, ip, &want);
	return addr && len == sizeof(*s) && s->sin_family == AF_INET &&
	       s->sin_addr.s_addr == want.s_addr && (port < 0 || ntohs(s->sin_port) == port);
}

static void check_getinfo(void)
{
	struct fi_info *info = NULL;
	int ret;

	/* fi_getinfo(3), addr_format: "FI_SOCKADDR_IN: Address is of type sockaddr_in (IPv4)." */
	ret = getinfo(hints_for("emu:igb", FI_MSG), NULL, NULL, 0, &info);
	CHECK(ret == 0, "fi_getinfo(FI_SOCKADDR_IN): %d", ret);
	if (ret)
		return;
	CHECK(info->next == NULL, "one info for one domain");
	CHECK(info->addr_format == FI_SOCKADDR_IN, "addr_format %u", info->addr_format);
	/* src_addr: "On output a provider shall return an address that corresponds to the
	 * indicated fabric, domain, node, and/or service fields": the domain's address, port 0
	 * (a free one is bound by fi_endpoint). */
	CHECK(is_sin(info->src_addr, info->src_addrlen, A_ADDR, 0), "src_addr");
	CHECK(info->ep_attr->protocol == FI_PROTO_UDP, "protocol %u", info->ep_attr->protocol);
	CHECK(info->ep_attr->max_msg_size > 1000, "max_msg_size %zu", info->ep_attr->max_msg_size);
	CHECK(info->ep_attr->msg_prefix_size == 0, "no prefix asked for");
	CHECK(info->domain_attr->cq_data_size == 0, "a UDP datagram carries no CQ data");
	CHECK(info->domain_attr->max_ep_rx_ctx == 1, "a datagram names no receive context");
	fi_freeinfo(info);

	/* Without a format in the hints a configured NIC offers both, FI_SOCKADDR_IN first
	 * (docs/libfabric.md). */
	struct fi_info *h = hints_for("emu:igb", FI_MSG);
	h->addr_format = FI_FORMAT_UNSPEC;
	ret = getinfo(h, NULL, NULL, 0, &info);
	CHECK(ret == 0 && info->addr_format == FI_SOCKADDR_IN && info->next &&
		      info->next->addr_format == FI_FORMAT_UNSPEC && info->next->next == NULL,
	      "both formats: %d", ret);
	if (ret == 0)
		fi_freeinfo(info);

	/* fi_getinfo(3): "If FI_SOURCE is specified, then the node and service parameters
	 * specify the local source address." A numeric address picks the domain that has it. */
	h = hints_for(NULL, FI_MSG);
	ret = getinfo(h, A_ADDR, "5001", FI_SOURCE, &info);
	CHECK(ret == 0, "fi_getinfo(%s, 5001, FI_SOURCE): %d", A_ADDR, ret);
	if (ret == 0) {
		CHECK(info->next == NULL && strcmp(info->domain_attr->name, "emu:igb") == 0,
		      "only the NIC with that address: %s", info->domain_attr->name);
		CHECK(is_sin(info->src_addr, info->src_addrlen, A_ADDR, A_PORT), "src port 5001");
		fi_freeinfo(info);
	}
	/* Without FI_SOURCE they name the destination: "on output a provider shall return an
	 * address the corresponds to the indicated node and/or service fields". */
	ret = getinfo(hints_for("emu:igb", FI_MSG), B_ADDR, "6000", 0, &info);
	CHECK(ret == 0, "fi_getinfo(%s, 6000): %d", B_ADDR, ret);
	if (ret == 0) {
		CHECK(is_sin(info->dest_addr, info->dest_addrlen, B_ADDR, 6000), "dest_addr");
		fi_freeinfo(info);
	}

	/* What plain UDP cannot give matches nothing (fi_getinfo(3): "-FI_ENODATA: No fabric
	 * or domain could be found that matches the hints"). */
	ret = getinfo(hints_for(NULL, FI_MSG), "192.0.2.77", NULL, FI_SOURCE, &info);
	CHECK(ret == -FI_ENODATA, "an address no domain has: %d", ret);
	ret = getinfo(hints_for(NULL, FI_MSG), "localhost", NULL, FI_SOURCE, &info);
	CHECK(ret == -FI_ENODATA, "names are not resolved: %d", ret);
	ret = getinfo(hints_for(NULL, FI_MSG | FI_MULTI_RECV), NULL, NULL, 0, &info);
	CHECK(ret == -FI_ENODATA, "FI_MULTI_RECV: %d", ret);
	h = hints_for(NULL, FI_MSG);
	h->domain_attr->cq_data_size = 8;
	ret = getinfo(h, NULL, NULL, 0, &info);
	CHECK(ret == -FI_ENODATA, "remote CQ data: %d", ret);
	h = hints_for(NULL, FI_MSG);
	h->ep_attr->rx_ctx_cnt = 2;
	ret = getinfo(h, NULL, NULL, 0, &info);
	CHECK(ret == -FI_ENODATA, "two receive contexts: %d", ret);
	/* emu:virtio-net has no IPv4 configuration: it offers no FI_SOCKADDR_IN. */
	ret = getinfo(hints_for("emu:virtio-net", FI_MSG), NULL, NULL, 0, &info);
	CHECK(ret == -FI_ENODATA, "a NIC without a configuration: %d", ret);
}

static int open_node(struct node *n, struct fi_info *info)
{
	struct fi_cq_attr cq_attr = { .format = FI_CQ_FORMAT_DATA };
	struct fi_av_attr av_attr = { .type = FI_AV_TABLE };
	size_t len = sizeof(n->name);
	int ret;

	n->info = info;
	CHECK(fi_fabric(info->fabric_attr, &n->fabric, NULL) == 0, "fi_fabric");
	ret = fi_domain(n->fabric, info, &n->domain, NULL);
	CHECK(ret == 0, "fi_domain(%s): %d", info->domain_attr->name, ret);
	if (ret)
		return ret;
	CHECK(fi_cq_open(n->domain, &cq_attr, &n->cq, NULL) == 0, "fi_cq_open");
	CHECK(fi_av_open(n->domain, &av_attr, &n->av, NULL) == 0, "fi_av_open");
	n->buf = calloc(1, BUF);
	ret = fi_mr_reg(n->domain, n->buf, BUF, FI_SEND | FI_RECV, 0, 0, 0, &n->mr, NULL);
	CHECK(ret == 0, "fi_mr_reg: %d", ret);
	ret = fi_endpoint(n->domain, info, &n->ep, NULL);
	CHECK(ret == 0, "fi_endpoint: %d", ret);
	if (ret)
		return ret;
	CHECK(fi_ep_bind(n->ep, &n->av->fid, 0) == 0, "fi_ep_bind(av)");
	CHECK(fi_ep_bind(n->ep, &n->cq->fid, FI_TRANSMIT | FI_RECV) == 0, "fi_ep_bind(cq)");
	{
		struct fi_cntr_attr cntr_attr = { .events = FI_CNTR_EVENTS_COMP };
		CHECK(fi_cntr_open(n->domain, &cntr_attr, &n->rx_cntr, NULL) == 0, "fi_cntr_open");
		CHECK(fi_ep_bind(n->ep, &n->rx_cntr->fid, FI_RECV) == 0, "fi_ep_bind(cntr)");
	}
	CHECK(fi_enable(n->ep) == 0, "fi_enable");
	/* fi_cm(3), fi_getname: "the endpoint's address ... is returned"; its size in addrlen. */
	ret = fi_getname(&n->ep->fid, &n->name, &len);
	CHECK(ret == 0 && len == sizeof(struct sockaddr_in), "fi_getname: %d, %zu", ret, len);
	return ret;
}

static void close_node(struct node *n)
{
	CHECK(fi_close(&n->ep->fid) == 0, "fi_close(ep)");
	CHECK(fi_close(&n->rx_cntr->fid) == 0, "fi_close(cntr)");
	CHECK(fi_close(&n->mr->fid) == 0, "fi_close(mr)");
	CHECK(fi_close(&n->cq->fid) == 0, "fi_close(cq)");
	CHECK(fi_close(&n->av->fid) == 0, "fi_close(av)");
	CHECK(fi_close(&n->domain->fid) == 0, "fi_close(domain)");
	CHECK(fi_close(&n->fabric->fid) == 0, "fi_close(fabric)");
	fi_freeinfo(n->info);
	free(n->buf);
}

static unsigned char pattern(int seed, size_t i)
{
	return (unsigned char)(seed * 31 + i * 7 + (i >> 8));
}

static void fill(unsigned char *p, size_t len, int seed)
{
	for (size_t i = 0; i < len; i++)
		p[i] = pattern(seed, i);
}

static int matches(const unsigned char *p, size_t len, int seed)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != pattern(seed, i))
			return 0;
	return 1;
}

/* Drives `n`'s progress without reading its CQ: the provider's size calls progress the
 * endpoint first (docs/libfabric.md). fi_rx_size_left is deprecated in libfabric 1.17, and
 * still the one call that does this without taking a completion. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static void progress(struct node *n)
{
	(void)fi_rx_size_left(n->ep);
}
#pragma GCC diagnostic pop

/*
 * Reads one entry of `want`'s CQ with fi_cq_readfrom for up to `secs` seconds while driving
 * `other`'s progress (fi_rx_size_left progresses an endpoint, and with it ARP: each side must
 * answer the other's requests): what fi_cq_readfrom returned last.
 */
static ssize_t readfrom(struct node *want, struct node *other, struct fi_cq_data_entry *e,
			fi_addr_t *src, double secs)
{
	double t0 = now_s();
	ssize_t ret;
	do {
		ret = fi_cq_readfrom(want->cq, e, 1, src);
		if (ret == -FI_EAGAIN && other)
			progress(other);
	} while (ret == -FI_EAGAIN && now_s() - t0 < secs);
	return ret;
}

/* Sends `len` bytes of pattern `seed` from `from` to `dest` (the buffer's second half). */
static int send_msg(struct node *from, fi_addr_t dest, size_t len, int seed, void *ctx)
{
	unsigned char *p = from->buf + BUF / 2;
	fill(p, len, seed);
	return (int)fi_send(from->ep, p, len, fi_mr_desc(from->mr), dest, ctx);
}

/* A send's own completion at `from`, with `other` progressing meanwhile. */
static void sent(struct node *from, struct node *other, void *ctx)
{
	struct fi_cq_data_entry e;
	fi_addr_t src;
	ssize_t ret = readfrom(from, other, &e, &src, 5);
	CHECK(ret == 1 && e.op_context == ctx && (e.flags & FI_SEND), "send completion: %zd",
	      ret);
}

/* Posts the receive of slot `i` of `to`'s buffer. Each node keeps RX posted; the ring holds
 * the endpoint's own buffers whatever is posted (docs/libfabric.md, "Receives: a pool of the
 * endpoint's buffers"), so ARP frames take none of these. */
static void post_recv(struct node *to, int i)
{
	unsigned char *slot = to->buf + i * SLOT;
	memset(slot, 0, SLOT);
	ssize_t ret =
		fi_recv(to->ep, slot, SLOT, fi_mr_desc(to->mr), FI_ADDR_UNSPEC, &to->rx_ctx[i]);
	CHECK(ret == 0, "fi_recv: %zd", ret);
}

/* The slot of `to` whose receive has `ctx`, or -1. */
static int slot_of(struct node *to, void *ctx)
{
	for (int i = 0; i < RX; i++)
		if (ctx == &to->rx_ctx[i])
			return i;
	return -1;
}

/* Sends `len` bytes of pattern `seed` from `from` to `to` (at `dest` in from's AV) and checks
 * the datagram arrives byte for byte; `*src` is what fi_cq_readfrom gave. */
static void exchange(struct node *from, struct node *to, fi_addr_t dest, size_t len, int seed,
		     fi_addr_t *src)
{
	int ctx_s;
	struct fi_cq_data_entry e;
	int ret = send_msg(from, dest, len, seed, &ctx_s);
	CHECK(ret == 0, "fi_send(%zu): %d", len, ret);
	ssize_t n = readfrom(to, from, &e, src, 5);
	int slot = n == 1 ? slot_of(to, e.op_context) : -1;
	CHECK(slot >= 0 && e.len == len && (e.flags & FI_RECV), "receive of %zu: %zd, len %zu",
	      len, n, n == 1 ? e.len : 0);
	CHECK(slot >= 0 && matches(to->buf + slot * SLOT, len, seed),
	      "payload of %zu bytes byte for byte", len);
	sent(from, to, &ctx_s);
	if (slot >= 0)
		post_recv(to, slot);
}

int main(void)
{
	struct node a = { 0 }, b = { 0 };
	struct fi_info *info = NULL;
	fi_addr_t a_to_b = FI_ADDR_NOTAVAIL, b_to_a = FI_ADDR_NOTAVAIL, src;
	int ret;

	check_getinfo();

	/* Node a: bound to port 5001 through fi_getinfo's service with FI_SOURCE. */
	ret = getinfo(hints_for("emu:igb", FI_MSG), A_ADDR, "5001", FI_SOURCE, &info);
	CHECK(ret == 0, "fi_getinfo(a): %d", ret);
	if (ret || open_node(&a, info))
		goto out;
	CHECK(is_sin(&a.name, sizeof(a.name), A_ADDR, A_PORT), "a's name is %s:5001", A_ADDR);
	/* Node b: a free port, FI_SOURCE and FI_SOURCE_ERR. */
	ret = getinfo(hints_for("emu:e1000e", FI_MSG | FI_SOURCE | FI_SOURCE_ERR), NULL, NULL, 0,
		      &info);
	CHECK(ret == 0, "fi_getinfo(b): %d", ret);
	if (ret || open_node(&b, info))
		goto out;
	CHECK(is_sin(&b.name, sizeof(b.name), B_ADDR, -1) && ntohs(b.name.sin_port) >= 49152,
	      "b's name is %s on a port of the dynamic range: %u", B_ADDR, ntohs(b.name.sin_port));

	for (int i = 0; i < RX; i++) {
		post_recv(&a, i);
		post_recv(&b, i);
	}

	/* fi_cm(3): "If the actual length of the address is greater than what was specified,
	 * the address will be truncated and -FI_ETOOSMALL will be returned", addrlen the size. */
	{
		unsigned char small[8];
		size_t len = sizeof(small);
		ret = fi_getname(&a.ep->fid, small, &len);
		CHECK(ret == -FI_ETOOSMALL && len == sizeof(struct sockaddr_in),
		      "fi_getname too small: %d, %zu", ret, len);
	}

	/* fi_av(3): "Addresses inserted into an address vector must be in the same format as
	 * specified in the addr_format field of the fi_info struct provided when opening the
	 * corresponding domain." */
	ret = fi_av_insert(a.av, &b.name, 1, &a_to_b, 0, NULL);
	CHECK(ret == 1 && a_to_b != FI_ADDR_NOTAVAIL, "fi_av_insert(sockaddr_in): %d", ret);
	{
		struct sockaddr_in back;
		size_t len = sizeof(back);
		ret = fi_av_lookup(a.av, a_to_b, &back, &len);
		CHECK(ret == 0 && len == sizeof(back) && memcmp(&back, &b.name, 8) == 0,
		      "fi_av_lookup gives the sockaddr_in back: %d", ret);
		char text[64], want[64];
		size_t tlen = sizeof(text);
		snprintf(want, sizeof(want), "fi_sockaddr_in://%s:%u", B_ADDR,
			 ntohs(b.name.sin_port));
		/* fi_av(3): "The fi_av_straddr function converts the provided address into a
		 * printable string." (libfabric's form for sockaddr_in) */
		const char *s = fi_av_straddr(a.av, &b.name, text, &tlen);
		CHECK(s == text && strcmp(text, want) == 0 && tlen == strlen(want) + 1,
		      "fi_av_straddr: %s (want %s)", s ? s : "(null)", want);
		/* Another family is not a sockaddr_in: refused, nothing inserted. */
		struct sockaddr_in bad = b.name;
		fi_addr_t none = 7;
		bad.sin_family = AF_INET6;
		ret = fi_av_insert(a.av, &bad, 1, &none, 0, NULL);
		CHECK(ret == -FI_EINVAL, "fi_av_insert(AF_INET6): %d", ret);
		ret = fi_av_insertsvc(a.av, "nohost", "1", &none, 0, NULL);
		CHECK(ret == -FI_EINVAL, "fi_av_insertsvc(a name): %d", ret);
		ret = fi_av_lookup(a.av, 12345, &back, &len);
		CHECK(ret == -FI_ENOENT, "fi_av_lookup of an unknown fi_addr: %d", ret);
	}

	/* a → b. b's AV is empty: fi_cq(3), "For endpoints allocated using the FI_SOURCE_ERR
	 * capability, if the source address cannot be converted into a valid fi_addr_t value,
	 * fi_cq_readfrom will return -FI_EAVAIL, even if the data were received successfully.
	 * The completion will then be reported through fi_cq_readerr with error code
	 * -FI_EADDRNOTAVAIL." */
	{
		int ctx_s;
		struct fi_cq_data_entry e;
		struct fi_cq_err_entry err = { 0 };
		ret = send_msg(&a, a_to_b, 300, 1, &ctx_s);
		CHECK(ret == 0, "fi_send: %d", ret);
		ssize_t n = readfrom(&b, &a, &e, &src, 5);
		CHECK(n == -FI_EAVAIL, "an unknown sender under FI_SOURCE_ERR: %zd", n);
		n = fi_cq_readerr(b.cq, &err, 0);
		int slot = n == 1 ? slot_of(&b, err.op_context) : -1;
		CHECK(slot >= 0 && err.err == FI_EADDRNOTAVAIL, "fi_cq_readerr: %zd, err %d", n,
		      err.err);
		/* "The err_data field will be set to the source address data. The source address
		 * will be in the same format as specified through the fi_info addr_format field
		 * for the opened domain. This may be passed directly into an fi_av_insert call to
		 * add the source address to the address vector." */
		CHECK(n == 1 && is_sin(err.err_data, err.err_data_size, A_ADDR, A_PORT),
		      "err_data is a's sockaddr_in (%zu bytes)", err.err_data_size);
		CHECK(slot >= 0 && err.len == 300 && matches(b.buf + slot * SLOT, 300, 1),
		      "the data were received, byte for byte: len %zu", err.len);
		if (n == 1) {
			ret = fi_av_insert(b.av, err.err_data, 1, &b_to_a, 0, NULL);
			CHECK(ret == 1, "fi_av_insert(err_data): %d", ret);
		}
		sent(&a, &b, &ctx_s);
		if (slot >= 0)
			post_recv(&b, slot);
	}
	/* Now a is in b's AV: fi_cq(3), FI_SOURCE: fi_cq_readfrom gives its fi_addr. */
	exchange(&a, &b, a_to_b, 700, 2, &src);
	CHECK(src == b_to_a, "FI_SOURCE: %llu, want %llu", (unsigned long long)src,
	      (unsigned long long)b_to_a);
	/* b → a, the other way. */
	exchange(&b, &a, b_to_a, 1000, 3, &src);

	/* fi_endpoint(3), max_msg_size: "Defines the maximum size for an application data
	 * transfer as a single operation." The largest passes, one byte more is refused. */
	{
		size_t max = a.info->ep_attr->max_msg_size;
		exchange(&a, &b, a_to_b, max, 4, &src);
		int ctx;
		ret = send_msg(&a, a_to_b, max + 1, 5, &ctx);
		CHECK(ret == -FI_EMSGSIZE, "max_msg_size + 1: %d", ret);
		/* A UDP datagram has no field for remote CQ data. */
		ret = (int)fi_senddata(a.ep, a.buf + BUF / 2, 8, fi_mr_desc(a.mr), 1, a_to_b, &ctx);
		CHECK(ret == -FI_EBADFLAGS, "fi_senddata: %d", ret);
		/* fi_scalable_ep on an FI_SOCKADDR_IN info is not offered. */
		struct fid_ep *sep = NULL;
		ret = fi_scalable_ep(a.domain, a.info, &sep, NULL);
		CHECK(ret == -FI_ENOSYS, "fi_scalable_ep: %d", ret);
	}

	/* A peer nobody answers ARP for: docs/ip.md, ARP asks 3 times a second apart, then each
	 * held send fails with FI_EHOSTUNREACH; fi_cq(3): errors are read with fi_cq_readerr. */
	{
		fi_addr_t nobody = FI_ADDR_NOTAVAIL;
		int ctx;
		struct fi_cq_data_entry e;
		struct fi_cq_err_entry err = { 0 };
		ret = fi_av_insertsvc(a.av, NOBODY, "7", &nobody, 0, NULL);
		CHECK(ret == 1, "fi_av_insertsvc(%s, 7): %d", NOBODY, ret);
		ret = send_msg(&a, nobody, 64, 6, &ctx);
		CHECK(ret == 0, "fi_send to nobody: %d", ret);
		ssize_t n = readfrom(&a, &b, &e, &src, 10);
		CHECK(n == -FI_EAVAIL, "the send to nobody fails: %zd", n);
		n = fi_cq_readerr(a.cq, &err, 0);
		CHECK(n == 1 && err.err == FI_EHOSTUNREACH && err.op_context == &ctx,
		      "FI_EHOSTUNREACH: %zd, err %d", n, err.err);
		/* The endpoint goes on: a datagram to b still arrives. */
		exchange(&a, &b, a_to_b, 64, 7, &src);
	}

	/* The receive pool (docs/libfabric.md, "FI_SOCKADDR_IN (plain UDP)"): b's receives wait
	 * in the provider, its ring holds buffers of b's own, and a datagram that finds no
	 * receive is held until one is posted. */
	if (b.ep) {
		size_t rx_size = b.info->rx_attr->size;
		uint64_t ok0 = fi_cntr_read(b.rx_cntr), err0 = fi_cntr_readerr(b.rx_cntr);
		/* fi_endpoint(3), fi_cancel: "An error queue entry will be available in the the
		 * associated error queue with error code FI_ECANCELED." */
		for (int i = 0; i < RX; i++) {
			struct fi_cq_data_entry e;
			struct fi_cq_err_entry err = { 0 };
			ret = (int)fi_cancel(&b.ep->fid, &b.rx_ctx[i]);
			CHECK(ret == 0, "fi_cancel of a waiting receive: %d", ret);
			ssize_t n = fi_cq_read(b.cq, &e, 1);
			CHECK(n == -FI_EAVAIL, "the cancel's entry is an error: %zd", n);
			n = fi_cq_readerr(b.cq, &err, 0);
			CHECK(n == 1 && err.err == FI_ECANCELED && err.op_context == &b.rx_ctx[i] &&
				      (err.flags & FI_RECV),
			      "FI_ECANCELED for receive %d: %zd, err %d", i, n, err.err);
		}
		ret = (int)fi_cancel(&b.ep->fid, &b.rx_ctx[0]);
		CHECK(ret == -FI_ENOENT, "a receive is cancelled once: %d", ret);
		/* fi_cntr(3): "If an operation associated with the counter encounters an error, it
		 * will increment the error value associated with the counter." */
		CHECK(fi_cntr_readerr(b.rx_cntr) == err0 + RX, "each cancel counted as an error");
		/* fi_endpoint(3), fi_rx_size_left: "a lower bound on the number of receive
		 * operations that may be posted to the given endpoint without that operation
		 * returning -FI_EAGAIN" — every receive may wait. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
		ssize_t left = fi_rx_size_left(b.ep);
#pragma GCC diagnostic pop
		CHECK(left == (ssize_t)rx_size, "fi_rx_size_left with none posted: %zd of %zu", left,
		      rx_size);
		/* Three datagrams to b, which has no receive posted: held, no completion. What a DGRAM
		 * endpoint does with a datagram no receive waits for is the provider's choice;
		 * ringfab's is docs/semantics.md's row on fi_rx_size_left, fi_cancel and fi_cntr
		 * (held, as a socket holds it, and counted only when a receive takes it). */
		for (int seed = 20; seed < 23; seed++) {
			int ctx_s;
			ret = send_msg(&a, a_to_b, 100 + seed, seed, &ctx_s);
			CHECK(ret == 0, "fi_send(%d): %d", seed, ret);
			sent(&a, &b, &ctx_s);
		}
		struct fi_cq_data_entry e[4];
		ssize_t n = readfrom(&b, &a, e, &src, 0.5);
		CHECK(n == -FI_EAGAIN, "no receive, no completion: %zd", n);
		CHECK(fi_cntr_read(b.rx_cntr) == ok0,
		      "a held datagram is not counted: %llu (was %llu)",
		      (unsigned long long)fi_cntr_read(b.rx_cntr), (unsigned long long)ok0);
		/* Receives posted now take them, oldest first, at once. */
		for (int i = 0; i < 3; i++)
			post_recv(&b, i);
		n = fi_cq_read(b.cq, e, 4);
		CHECK(n == 3, "the held datagrams complete the receives posted: %zd", n);
		for (int i = 0; i < 3 && n == 3; i++) {
			int slot = slot_of(&b, e[i].op_context);
			CHECK(slot == i && e[i].len == (size_t)(120 + i) &&
				      matches(b.buf + slot * SLOT, e[i].len, 20 + i),
			      "receive %d holds datagram %d byte for byte: slot %d, len %zu", i, i,
			      slot, e[i].len);
		}
		CHECK(fi_cntr_read(b.rx_cntr) == ok0 + 3, "counted when matched");
		/* fi_cq(3), olen: "It is used to indicate that a received message has overrun the
		 * available buffer space and has been truncated. The olen specifies the amount of
		 * data that did not fit into the available receive buffer and was discarded." */
		{
			int ctx_s, ctx_r;
			struct fi_cq_err_entry err = { 0 };
			ret = (int)fi_recv(b.ep, b.buf, 50, fi_mr_desc(b.mr), FI_ADDR_UNSPEC, &ctx_r);
			CHECK(ret == 0, "fi_recv(50): %d", ret);
			ret = send_msg(&a, a_to_b, 300, 30, &ctx_s);
			CHECK(ret == 0, "fi_send(300): %d", ret);
			n = readfrom(&b, &a, e, &src, 5);
			CHECK(n == -FI_EAVAIL, "a truncated receive is an error: %zd", n);
			n = fi_cq_readerr(b.cq, &err, 0);
			CHECK(n == 1 && err.err == FI_ETRUNC && err.op_context == &ctx_r &&
				      err.len == 50 && err.olen == 250 && matches(b.buf, 50, 30),
			      "FI_ETRUNC: %zd, err %d, len %zu, olen %zu", n, err.err, err.len,
			      err.olen);
			sent(&a, &b, &ctx_s);
		}
		/* And the exchanges go on with the receives posted again. */
		post_recv(&b, 3);
		exchange(&a, &b, a_to_b, 500, 31, &src);
	}

out:
	if (b.ep)
		close_node(&b);
	if (a.ep)
		close_node(&a);
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
