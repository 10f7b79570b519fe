import canonicalize from "canonicalize";
console.log(typeof canonicalize, canonicalize({b:1,a:[1e21,0.1,-0]}));
