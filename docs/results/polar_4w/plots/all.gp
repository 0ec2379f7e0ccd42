set terminal pngcairo noenhanced size 900,560 font 'DejaVu Sans,11'
set datafile missing '?'
set grid
set key bottom right
set ylabel 'test accuracy (%)'
set output 'docs/results/polar_4w/accuracy_vs_epoch_all.png'
set title 'polar_4w'
set xlabel 'epoch'
unset logscale x
plot 'docs/results/polar_4w/plots/all_0.dat' using 1:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/polar_4w/plots/all_1.dat' using 1:2 with linespoints lw 2 pt 2 title 'polar_r50_allgather', \
     'docs/results/polar_4w/plots/all_2.dat' using 1:2 with linespoints lw 2 pt 3 title 'polar_r50_twophase', \
     'docs/results/polar_4w/plots/all_3.dat' using 1:2 with linespoints lw 2 pt 4 title 'polar_r25_allgather', \
     'docs/results/polar_4w/plots/all_4.dat' using 1:2 with linespoints lw 2 pt 5 title 'polar_r25_twophase', \
     'docs/results/polar_4w/plots/all_5.dat' using 1:2 with linespoints lw 2 pt 6 title 'polar_r10_allgather', \
     'docs/results/polar_4w/plots/all_6.dat' using 1:2 with linespoints lw 2 pt 7 title 'efsign', \
     'docs/results/polar_4w/plots/all_7.dat' using 1:2 with linespoints lw 2 pt 8 title 'topk_b50_ef', \
     'docs/results/polar_4w/plots/all_8.dat' using 1:2 with linespoints lw 2 pt 9 title 'topk_b25_ef', \
     'docs/results/polar_4w/plots/all_9.dat' using 1:2 with linespoints lw 2 pt 10 title 'topk_b10_ef'
set output 'docs/results/polar_4w/accuracy_vs_time_all.png'
set title 'polar_4w'
set xlabel 'wall time (s)'
unset logscale x
plot 'docs/results/polar_4w/plots/all_0.dat' using 3:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/polar_4w/plots/all_1.dat' using 3:2 with linespoints lw 2 pt 2 title 'polar_r50_allgather', \
     'docs/results/polar_4w/plots/all_2.dat' using 3:2 with linespoints lw 2 pt 3 title 'polar_r50_twophase', \
     'docs/results/polar_4w/plots/all_3.dat' using 3:2 with linespoints lw 2 pt 4 title 'polar_r25_allgather', \
     'docs/results/polar_4w/plots/all_4.dat' using 3:2 with linespoints lw 2 pt 5 title 'polar_r25_twophase', \
     'docs/results/polar_4w/plots/all_5.dat' using 3:2 with linespoints lw 2 pt 6 title 'polar_r10_allgather', \
     'docs/results/polar_4w/plots/all_6.dat' using 3:2 with linespoints lw 2 pt 7 title 'efsign', \
     'docs/results/polar_4w/plots/all_7.dat' using 3:2 with linespoints lw 2 pt 8 title 'topk_b50_ef', \
     'docs/results/polar_4w/plots/all_8.dat' using 3:2 with linespoints lw 2 pt 9 title 'topk_b25_ef', \
     'docs/results/polar_4w/plots/all_9.dat' using 3:2 with linespoints lw 2 pt 10 title 'topk_b10_ef'
set output 'docs/results/polar_4w/accuracy_vs_bytes_all.png'
set title 'polar_4w'
set xlabel 'MB sent per worker'
set logscale x
plot 'docs/results/polar_4w/plots/all_0.dat' using 4:2 with linespoints lw 2 pt 1 title 'dense', \
     'docs/results/polar_4w/plots/all_1.dat' using 4:2 with linespoints lw 2 pt 2 title 'polar_r50_allgather', \
     'docs/results/polar_4w/plots/all_2.dat' using 4:2 with linespoints lw 2 pt 3 title 'polar_r50_twophase', \
     'docs/results/polar_4w/plots/all_3.dat' using 4:2 with linespoints lw 2 pt 4 title 'polar_r25_allgather', \
     'docs/results/polar_4w/plots/all_4.dat' using 4:2 with linespoints lw 2 pt 5 title 'polar_r25_twophase', \
     'docs/results/polar_4w/plots/all_5.dat' using 4:2 with linespoints lw 2 pt 6 title 'polar_r10_allgather', \
     'docs/results/polar_4w/plots/all_6.dat' using 4:2 with linespoints lw 2 pt 7 title 'efsign', \
     'docs/results/polar_4w/plots/all_7.dat' using 4:2 with linespoints lw 2 pt 8 title 'topk_b50_ef', \
     'docs/results/polar_4w/plots/all_8.dat' using 4:2 with linespoints lw 2 pt 9 title 'topk_b25_ef', \
     'docs/results/polar_4w/plots/all_9.dat' using 4:2 with linespoints lw 2 pt 10 title 'topk_b10_ef'
