import sys
from collections import OrderedDict
H=1080; W=1920; r=8
PL=W*16; G=W*3; S=W*4; O=W*4
CAP=float(sys.argv[1])*1e6 if len(sys.argv)>1 else 50e6
def refl(y):
    if y<0: return -y-1
    if y>=H: return 2*H-1-y
    return y
class L2:
    def __init__(s): s.d=OrderedDict(); s.sz=0; s.hit={}; s.miss={}
    def acc(s,key,size,write=False):
        k=key[0]
        if key in s.d:
            s.d.move_to_end(key)
            if not write: s.hit[k]=s.hit.get(k,0)+size
        else:
            if not write: s.miss[k]=s.miss.get(k,0)+size
            s.d[key]=size; s.sz+=size
            while s.sz>CAP:
                _,v=s.d.popitem(last=False); s.sz-=v
def pairs(R):
    out=[]
    for top in range(0,H,2*R):
        c=min(top+R,H)
        out.append((top,c,min(c+R,H)))
    return out
def coef(l2,R):
    P=pairs(R)
    # prefetch: all rows at start
    for (top,c,bot) in P:
        for y in range(max(top-r,0),min(bot+r,H)):
            l2.acc(('g',y),G); l2.acc(('s',y),S)
    # warm-up
    for i in range(r+1):
        for (top,c,bot) in P:
            for y in (refl(c-1-i), refl(c+i)):
                l2.acc(('g',y),G); l2.acc(('s',y),S)
    for i in range(R):
        for (top,c,bot) in P:
            for (y,dirn) in ((c+i,1),(c-1-i,-1)):
                if not (top<=y<bot): continue
                if i>0:
                    for yy in (refl(y+dirn*r), refl(y-dirn*(r+1))):
                        l2.acc(('g',yy),G); l2.acc(('s',yy),S)
                l2.acc(('p',y),PL,True)
def final(l2,R,off=0):
    # pairs with centres at off + 2kR
    cs=list(range(off,H+R,2*R))
    P=[(max(c-R,0),min(c,H),min(c+R,H)) for c in cs if c-R<H]
    for i in range(r+1):
        for (top,c,bot) in P:
            for y in (refl(c-1-i), refl(c+i)):
                l2.acc(('p',y),PL)
    for i in range(R):
        for (top,c,bot) in P:
            for (y,dirn) in ((c+i,1),(c-1-i,-1)):
                if not (top<=y<bot): continue
                l2.acc(('g',y),G)
                if i>0:
                    for yy in (refl(y+dirn*r), refl(y-dirn*(r+1))):
                        l2.acc(('p',yy),PL)
                l2.acc(('o',y),O,True)
Rc=13
for name,Rf,off in (('current Rf=10 centres 20k+10',10,10),('Rf=13 centres at coef boundaries 26k',13,0),('Rf=13 centres = coef centres',13,13),('Rf=10 centres 20k',10,0)):
    l2=L2()
    for call in range(3):
        l2.hit={}; l2.miss={}
        coef(l2,Rc); ch=dict(l2.hit); cm=dict(l2.miss)
        l2.hit={}; l2.miss={}
        final(l2,Rf,off)
    print(f"{name}: coef miss MB {sum(cm.values())/1e6:.1f} hit {sum(ch.values())/1e6:.1f}; final plane miss {l2.miss.get('p',0)/1e6:.1f} hit {l2.hit.get('p',0)/1e6:.1f}, guide miss {l2.miss.get('g',0)/1e6:.1f}")
