// shm-stall.c — libfabric 1.17's shm provider stops completing RMA writes under load when the
// target polls its CQ with short pauses (as weft's idle proxy does). Two forked processes; rank 0
// keeps W writes of SZ bytes (FI_DELIVERY_COMPLETE) in flight to rank 1, which polls its CQ every
// SL us. With SL=100 it ends "STALL posted N done N-1" after ~120k writes (one completion never
// comes and shm accepts no further write); with SL=0 (spinning) 300k writes complete. Observed 3/3
// on the 2-core dev VM. The same program with 'tcp;ofi_rxm' is the raw-libfabric reference quoted
// in bench/results/proxy.md.
//   gcc -O2 shm-stall.c -o shm-stall -lfabric
//   SL=100 N=300000 W=1024 ./shm-stall shm
//   SZ=65536 SL=0 N=5000 W=256 FI_TCP_IFACE=lo ./shm-stall 'tcp;ofi_rxm'
// Evidence for the provider rule in ffi/src/transport/fabric_endpoint.cpp; not built by CMake.
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/wait.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
#define CK(x) do{int r_=(int)(x); if(r_){fprintf(stderr,"%s: %d %s\n",#x,r_,fi_strerror(-r_)); exit(1);}}while(0)
int main(int argc,char**argv){
  const char* prov=argc>1?argv[1]:"shm";
  int p01[2],p10[2],pk[2]; pipe(p01);pipe(p10);pipe(pk);
  int rank = fork()==0 ? 1 : 0;
  struct fi_info* h=fi_allocinfo(); h->caps=FI_RMA|FI_WRITE|FI_REMOTE_WRITE; h->mode=FI_CONTEXT|FI_CONTEXT2; h->ep_attr->type=FI_EP_RDM;
  h->domain_attr->mr_mode=FI_MR_LOCAL|FI_MR_VIRT_ADDR|FI_MR_ALLOCATED|FI_MR_PROV_KEY|FI_MR_ENDPOINT|FI_MR_HMEM; h->domain_attr->threading=FI_THREAD_SAFE;
  h->tx_attr->op_flags=FI_DELIVERY_COMPLETE; h->fabric_attr->prov_name=strdup(prov);
  struct fi_info* info; CK(fi_getinfo(FI_VERSION(1,10),0,0,0,h,&info));
  struct fid_fabric* fab; struct fid_domain* dom; struct fid_cq* cq; struct fid_av* av; struct fid_ep* ep;
  CK(fi_fabric(info->fabric_attr,&fab,0)); CK(fi_domain(fab,info,&dom,0));
  struct fi_cq_attr ca={0}; ca.format=FI_CQ_FORMAT_CONTEXT; ca.size=4096; CK(fi_cq_open(dom,&ca,&cq,0));
  struct fi_av_attr aa={0}; aa.type=FI_AV_TABLE; aa.count=2; CK(fi_av_open(dom,&aa,&av,0));
  CK(fi_endpoint(dom,info,&ep,0)); CK(fi_ep_bind(ep,&av->fid,0)); CK(fi_ep_bind(ep,&cq->fid,FI_TRANSMIT|FI_RECV)); CK(fi_enable(ep));
  char name[256]; size_t len=256; CK(fi_getname(&ep->fid,name,&len));
  size_t B=1<<24; char* buf; posix_memalign((void**)&buf,4096,B); memset(buf,rank+1,B);
  struct fid_mr* mr; struct iovec iov={buf,B}; struct fi_mr_attr ma={0}; ma.mr_iov=&iov; ma.iov_count=1; ma.access=FI_WRITE|FI_REMOTE_WRITE; ma.requested_key=1;
  CK(fi_mr_regattr(dom,&ma,0,&mr)); if(info->domain_attr->mr_mode&FI_MR_ENDPOINT){CK(fi_mr_bind(mr,&ep->fid,0));CK(fi_mr_enable(mr));}
  uint64_t mine[3]={ (info->domain_attr->mr_mode&FI_MR_VIRT_ADDR)?(uint64_t)buf:0, fi_mr_key(mr), len };
  char other[256]; uint64_t theirs[3];
  int wfd = rank==0?p01[1]:p10[1], rfd = rank==0?p10[0]:p01[0];
  write(wfd,mine,24); write(wfd,name,len); read(rfd,theirs,24); read(rfd,other,theirs[2]);
  char both[512]; memcpy(both+(rank*len),name,len); memcpy(both+((1-rank)*len),other,len);
  fi_addr_t fa[2]; if(fi_av_insert(av,both,2,fa,0,0)!=2){fprintf(stderr,"av\n");return 1;}
  write(wfd,"x",1); char c; read(rfd,&c,1);  // barrier
  int N=atoi(getenv("N")?getenv("N"):"3000"); int W=atoi(getenv("W")?getenv("W"):"64"); struct fi_context2* ctx=calloc(N,sizeof *ctx); struct fi_cq_entry e[64];
  if(rank==0){
    double t0=now(); int posted=0,done=0; void* desc=fi_mr_desc(mr);
    while(done<N){
      if(posted<N && posted-done<W){
        size_t SZ=atoi(getenv("SZ")?getenv("SZ"):"64"); struct iovec io={buf+(SZ*(posted%64))%(B-SZ),SZ}; struct fi_rma_iov ri={theirs[0]+(SZ*(posted%64))%(B-SZ),SZ,theirs[1]};
        struct fi_msg_rma m={0}; m.msg_iov=&io; m.desc=&desc; m.iov_count=1; m.addr=fa[1]; m.rma_iov=&ri; m.rma_iov_count=1; m.context=&ctx[posted];
        ssize_t r=fi_writemsg(ep,&m,FI_COMPLETION|FI_DELIVERY_COMPLETE); if(r==0) posted++; else if(r!=-FI_EAGAIN){fprintf(stderr,"write %zd\n",r);return 1;}
      }
      ssize_t n=fi_cq_read(cq,e,64); if(n>0) done+=n; else if(n!=-FI_EAGAIN){fprintf(stderr,"cq %zd\n",n);return 1;}
      if(now()-t0>20){printf("STALL posted %d done %d\n",posted,done); break;}
    }
    if(done==N) printf("ok %.0f/s\n",N/(now()-t0));
    write(pk[1],"x",1);
  } else {
    char cc; fd_set s;
    for(;;){ fi_cq_read(cq,e,64); struct timeval tv={0,atoi(getenv("SL")?getenv("SL"):"0")}; FD_ZERO(&s); FD_SET(pk[0],&s); if(select(pk[0]+1,&s,0,0,&tv)>0) break; }
  }
  fi_close(&ep->fid); fi_close(&mr->fid); fi_close(&av->fid); fi_close(&cq->fid); fi_close(&dom->fid); fi_close(&fab->fid);
  if(rank==0) wait(0);
  return 0;
}
