#version 330
// Blinn-Phong with a sky/ground hemisphere ambient.  u_pattern > 0 darkens sectors around the
// body z axis so that the spin of a round body can be seen; u_flat > 0 draws the plain colour
// (shadows, markers).
uniform vec3 u_color;
uniform vec3 u_eye;
uniform vec3 u_light_dir;     // unit, towards the light
uniform float u_pattern;
uniform float u_flat;
uniform float u_highlight;
uniform float u_alpha;

in vec3 v_world;
in vec3 v_normal;
in vec3 v_local;

out vec4 f_color;

void main() {
    if (u_flat > 0.5) {
        f_color = vec4(u_color, u_alpha);
        return;
    }
    vec3 base = u_color;
    if (u_pattern > 0.0) {
        float sector = step(0.0, sin(6.0 * atan(v_local.y, v_local.x)));
        base *= 1.0 - 0.3 * u_pattern * sector;
    }
    vec3 n = normalize(v_normal);
    vec3 v = normalize(u_eye - v_world);
    if (dot(n, v) < 0.0) n = -n;
    float diffuse = max(dot(n, u_light_dir), 0.0);
    vec3 h = normalize(u_light_dir + v);
    float specular = pow(max(dot(n, h), 0.0), 48.0) * 0.25;
    float hemi = 0.5 + 0.5 * n.z;
    vec3 ambient = mix(vec3(0.28, 0.26, 0.24), vec3(0.42, 0.45, 0.52), hemi);
    vec3 rgb = base * (ambient + 0.75 * diffuse) + vec3(specular);
    rgb = mix(rgb, vec3(1.0), 0.25 * u_highlight);
    f_color = vec4(rgb, u_alpha);
}
